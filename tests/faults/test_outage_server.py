"""A database server outage longer than WORKER_TIMEOUT costs no duplicate (SPEC §9.15).

While two workers run jobs, the server refuses their new connections and ends the ones they
have, each by its own means; every handler keeps running through it:

- PostgreSQL: ``ALTER DATABASE … ALLOW_CONNECTIONS false`` + ``pg_terminate_backend`` of
  the test database's backends;
- MariaDB: the workers connect as a user of their own, which is locked (``ALTER USER …
  ACCOUNT LOCK``: "this account is locked") and whose connections are killed (``KILL
  CONNECTION USER``), as root over the server's socket.

Only the test's own sessions are touched, never the server's others.
"""

import secrets
import subprocess
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from django.db import connection
from psycopg import sql

from .outages import HOSTS, through_outage

pytestmark = [
    pytest.mark.faults,
    pytest.mark.acceptance,
    pytest.mark.server_only,
    pytest.mark.django_db(transaction=True),
]

#: What the workers need to be cut off: environment variables for them, and the outage.
Outage = tuple[dict[str, str], Callable[[float], None]]


def refused_on_postgres(hold: float) -> None:
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


#: MariaDB's command-line client as root over the server's socket (scripts/ensure-mariadb).
MARIADB_ROOT = ("mariadb", "--protocol=socket", "-u", "root", "--batch", "--skip-column-names")
#: The hosts a MariaDB user connects from: TCP from this host, or the socket.
MARIADB_HOSTS = ("127.0.0.1", "localhost")


def as_mariadb_root(statements: str) -> None:
    """Run ``statements`` as MariaDB's root; skip the test if root cannot connect."""
    try:
        done = subprocess.run(
            [*MARIADB_ROOT, "-e", statements], capture_output=True, text=True, check=False
        )
    except FileNotFoundError:
        pytest.skip("needs MariaDB's command-line client (mariadb) to lock a user")
    if done.returncode != 0:
        if "Access denied" in done.stderr or "Can't connect" in done.stderr:
            pytest.skip(f"needs MariaDB's root over its socket: {done.stderr.strip()}")
        raise AssertionError(f"{statements!r} failed: {done.stderr}")


def _accounts(user: str) -> str:
    return ", ".join(f"'{user}'@'{host}'" for host in MARIADB_HOSTS)


@pytest.fixture
def mariadb_outage() -> Iterator[Outage]:
    """A MariaDB user of the workers' own, with rights on the test database only, and the
    outage that locks it and kills its connections (the test's own connection, as the
    usual test user, goes on); dropped after the test."""
    name = connection.settings_dict["NAME"]
    assert name.startswith("test_"), name
    user, password = f"{name}_outage"[:80], secrets.token_hex(12)
    accounts = _accounts(user)
    as_mariadb_root(
        f"DROP USER IF EXISTS {accounts};"
        + "".join(f"CREATE USER '{user}'@'{h}' IDENTIFIED BY '{password}';" for h in MARIADB_HOSTS)
        + f"GRANT ALL PRIVILEGES ON `{name}`.* TO {accounts};"
    )

    def refused(hold: float) -> None:
        """Refuse the workers' user and end its connections for ``hold`` seconds."""
        as_mariadb_root(f"ALTER USER {accounts} ACCOUNT LOCK; KILL CONNECTION USER '{user}';")
        try:
            time.sleep(hold)  # the outage's length is the fault under test
        finally:
            as_mariadb_root(f"ALTER USER {accounts} ACCOUNT UNLOCK;")

    try:
        yield {"MARIADB_USER": user, "MARIADB_PASSWORD": password}, refused
    finally:
        as_mariadb_root(f"DROP USER IF EXISTS {accounts};")


@pytest.fixture
def server_outage(request: pytest.FixtureRequest) -> Outage:
    """The outage of the server under test, and what its workers need to be cut off by it."""
    if connection.vendor == "postgresql":
        return {}, refused_on_postgres
    return request.getfixturevalue("mariadb_outage")


@HOSTS
def test_an_outage_longer_than_the_timeout_recovers_no_live_workers_job(
    spawn_worker, runs, hosts, server_outage
):
    env, refused = server_outage
    through_outage(spawn_worker, runs, hosts, refused, env=env)
