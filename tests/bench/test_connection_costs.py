"""``bench.connection_costs`` counts what the statements of Django's connection cost: the
WAL it reports is this database's records only (another database's writes meanwhile,
which the server's LSN counts, are left out), named by relation, with the commits of its
transactions; and the server CPU is that of the backend serving the connection.
"""

from __future__ import annotations

import os

import psycopg
import pytest
from django.db import connection

import django_watchdog
from bench.connection_costs import Costs

# Enqueues in autocommit commit, as the bench's do: their WAL reaches pg_waldump.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]

ENQUEUES = 20
#: Rows another database writes between the readings: far more WAL than the enqueues'.
OTHER_ROWS = 2_000


def other_database_writes() -> None:
    """``OTHER_ROWS`` rows into a table of the server's ``postgres`` database."""
    settings = connection.settings_dict
    with psycopg.connect(
        dbname="postgres",
        user=settings["USER"],
        password=settings["PASSWORD"] or None,
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        autocommit=True,
    ) as other:
        table = f"costs_elsewhere_{os.getpid()}"
        other.execute(f"CREATE TABLE {table} (n bigint, padding text)")
        try:
            other.execute(
                f"INSERT INTO {table} SELECT g, repeat('x', 100) FROM generate_series(1, %s) g",
                [OTHER_ROWS],
            )
        finally:
            other.execute(f"DROP TABLE {table}")


def test_the_wal_counted_is_this_databases_by_relation_not_the_servers() -> None:
    costs = Costs()
    if costs.waldump is None:
        pytest.skip("the server's pg_wal is not readable here")
    django_watchdog.enqueue("warm", queue="warm", lane="mail")
    before = costs.read()
    for n in range(ENQUEUES):
        django_watchdog.enqueue(f"j{n}", queue=f"q{n}", lane="mail")
    other_database_writes()
    found = costs.per_call(before, costs.read(), ENQUEUES)

    # The other database's 2,000 rows (over 100 bytes of WAL each) count in the server's
    # WAL, not in this database's.
    assert found["wal_bytes_server"] - found["wal_bytes"] > 100 * OTHER_ROWS / ENQUEUES
    relations = found["wal_by_relation"]
    assert not any(name.startswith("costs_elsewhere") for name in relations)
    # Each enqueue inserts its job (heap and primary key) and creates its queue, and commits.
    for name in ("watchdog_job", "watchdog_job_pkey", "watchdog_queue", "(commit)"):
        assert relations[name] > 0, relations
    assert found["wal_records"] >= 3
    assert 0 <= found["wal_fpi_bytes"] < found["wal_bytes"]
    assert found["server_cpu_us"] > 0
    assert found["blocks"] > 0
