"""The floor on watchdog's job table runs: ``bench.bench --smoke --db postgres --only
floor_jobs`` migrates a database of its own as watchdog's, prefills ``watchdog_job`` and
drains it with ``bench.floor --job-table``: every row claimed through the claim index and
settled as the table's constraints require, each once. The chained floors
(``bench.floor --chained``, one statement a job that settles the last and claims the next)
drain their tables the same way, the last job of each loop settled when it stops.

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


def dropped_after(system: str) -> Any:
    """A fixture: the smoke run's database name of ``system``; dropped afterwards (the
    bench drops and creates it)."""

    @pytest.fixture
    def database() -> Any:
        bench = smoke.bench_module()
        name = bench.PG_DATABASES[system] + SUFFIX
        yield name
        with connect("postgres") as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return database


floor_jobs_database = dropped_after("floor_jobs")
floor_chained_database = dropped_after("floor_chained")
floor_jobs_chained_database = dropped_after("floor_jobs_chained")


def job_states(name: str) -> tuple[dict[str, int], list[tuple[int]]]:
    """``watchdog_job``'s rows of database ``name`` by state/outcome, and their attempts."""
    with connect(name) as connection:
        states = dict(
            connection.execute(
                "SELECT state || '/' || coalesce(outcome, ''), count(*) FROM watchdog_job"
                " GROUP BY 1"
            ).fetchall()
        )
        attempts = connection.execute("SELECT DISTINCT attempts FROM watchdog_job").fetchall()
    return states, attempts


def assert_drained(tmp_path: Any, system: str, label: str, database: str) -> None:
    """The smoke run of ``system`` drained and printed its column (``label``), and left the
    last drain's rows of ``database`` settled once each, none claimed twice."""
    done, run = smoke.run(
        tmp_path, SUFFIX, "--db", "postgres", "--only", system, "--workloads", "drain"
    )
    assert run["failures"] == [], run["failures"]
    assert run["results"]["postgres"][system]["drain_p2_c1"]["median"] > 0
    assert f"| {label} |" in done.stdout
    states, attempts = job_states(database)
    assert set(states) == {"settled/completed"}, states
    assert attempts == [(1,)]


@pytest.mark.timeout(600)
def test_the_floor_drains_watchdogs_job_table(tmp_path, floor_jobs_database):
    assert_drained(tmp_path, "floor_jobs", "floor on watchdog's table", floor_jobs_database)


@pytest.mark.timeout(600)
def test_the_chained_floors_drain_their_tables(
    tmp_path, floor_chained_database, floor_jobs_chained_database
):
    done, run = smoke.run(
        tmp_path,
        SUFFIX,
        "--db",
        "postgres",
        "--only",
        "floor_chained,floor_jobs_chained",
        "--workloads",
        "drain",
    )
    assert run["failures"] == [], run["failures"]
    for system in ("floor_chained", "floor_jobs_chained"):
        assert run["results"]["postgres"][system]["drain_p2_c1"]["median"] > 0
    assert "| chained floor on watchdog's table |" in done.stdout
    # Every row of the last drain settled once, the last of each loop as it stopped.
    states, attempts = job_states(floor_jobs_chained_database)
    assert set(states) == {"settled/completed"}, states
    assert attempts == [(1,)]
    with connect(floor_chained_database) as connection:
        left = connection.execute("SELECT state, count(*) FROM bench_floor GROUP BY 1").fetchall()
    assert [state for state, _ in left] == ["done"], left


floor_worker_database = dropped_after("floor_worker")


@pytest.mark.timeout(600)
def test_the_workers_statements_drain_watchdogs_serial_queues(tmp_path, floor_worker_database):
    """``bench.floor --worker-statements``: the default worker's exchange in a bare loop,
    on jobs watchdog enqueued over serial queues. Each job settles once, completed, and a
    queue's jobs run one after another, in their order (the statements keep the queue's
    head, with nothing of the worker around them)."""
    assert_drained(tmp_path, "floor_worker", "the worker's statements, bare", floor_worker_database)
    with connect(floor_worker_database) as connection:
        overlapping = connection.execute(smoke.RUNS_OUT_OF_ORDER).fetchone()[0]
        queues = connection.execute("SELECT count(DISTINCT queue) FROM watchdog_job").fetchone()
    assert overlapping == 0
    assert queues[0] > 1
