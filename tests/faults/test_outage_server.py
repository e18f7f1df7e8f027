"""A PostgreSQL outage longer than WORKER_TIMEOUT costs no duplicate (SPEC §9.15).

The server refuses new connections to the test database and terminates its backends
(``ALTER DATABASE … ALLOW_CONNECTIONS false`` + ``pg_terminate_backend``) while two workers
run jobs; every handler keeps running through it.
"""

import time

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from .outages import HOSTS, through_outage

pytestmark = [
    pytest.mark.faults,
    pytest.mark.acceptance,
    pytest.mark.postgres_only,
    pytest.mark.django_db(transaction=True),
]


def refused(hold: float) -> None:
    """Refuse connections to the test database and end its sessions for ``hold`` seconds.

    Only the test database is touched (never the server's others), from a connection to the
    ``postgres`` database.
    """
    settings = connection.settings_dict
    name = settings["NAME"]
    assert name.startswith("test_"), name
    connection.close()
    admin = psycopg.connect(
        host=settings["HOST"] or "127.0.0.1",
        port=int(settings["PORT"] or 5432),
        user=settings["USER"],
        dbname="postgres",
        autocommit=True,
    )
    database = sql.Identifier(name)
    try:
        admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(database))
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            time.sleep(hold)  # the outage's length is the fault under test
        finally:
            admin.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(database))
    finally:
        admin.close()


@HOSTS
def test_an_outage_longer_than_the_timeout_recovers_no_live_workers_job(spawn_worker, runs, hosts):
    through_outage(spawn_worker, runs, hosts, refused)
