"""The floor on watchdog's job table runs: ``bench.bench --smoke --db postgres --only
floor_jobs`` migrates a database of its own as watchdog's, prefills ``watchdog_job`` and
drains it with ``bench.floor --job-table``: every row claimed through the claim index and
settled as the table's constraints require, each once.

Databases ``bench_*<suffix>`` (WATCHDOG_TEST_DB_SUFFIX) and a work directory of its own keep
it apart from a bench running on the same machine.
"""

import os
from typing import Any

import pytest

from tests.bench import smoke

SUFFIX = os.environ.get("WATCHDOG_TEST_DB_SUFFIX", "") + "_smoke"

pytestmark = [pytest.mark.postgres_only, pytest.mark.acceptance]


def connect(name: str) -> Any:
    """A connection to ``name`` on the bench's PostgreSQL server, in autocommit."""
    import psycopg

    bench = smoke.bench_module()
    return psycopg.connect(dbname=name, autocommit=True, **bench.PG)


@pytest.fixture
def floor_jobs_database():
    """The smoke run's database name; dropped afterwards (the bench drops and creates it)."""
    bench = smoke.bench_module()
    name = bench.PG_DATABASES["floor_jobs"] + SUFFIX
    yield name
    with connect("postgres") as connection:
        connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.timeout(600)
def test_the_floor_drains_watchdogs_job_table(tmp_path, floor_jobs_database):
    done, run = smoke.run(
        tmp_path, SUFFIX, "--db", "postgres", "--only", "floor_jobs", "--workloads", "drain"
    )
    assert run["failures"] == [], run["failures"]
    assert run["results"]["postgres"]["floor_jobs"]["drain_p2_c1"]["median"] > 0
    assert "| floor on watchdog's table |" in done.stdout
    with connect(floor_jobs_database) as connection:
        states = dict(
            connection.execute(
                "SELECT state || '/' || coalesce(outcome, ''), count(*) FROM watchdog_job"
                " GROUP BY 1"
            ).fetchall()
        )
        attempts = connection.execute("SELECT DISTINCT attempts FROM watchdog_job").fetchall()
    # The last drain's rows, as the loop left them: settled once each, none claimed twice.
    assert set(states) == {"settled/completed"}, states
    assert attempts == [(1,)]
