"""The benchmark's flatness workload runs every step on PostgreSQL: ``bench.bench --smoke
--only watchdog --workloads flatness --db postgres`` measures, on empty tables and then
with the backlog, the drains of the bench's ``--batch`` workers and of the default worker,
single enqueues (timed, and counted: CPU, WAL, blocks), ``watchdog status`` and the
admin's job and queue lists, and with the backlog a ``watchdog prune`` while default
workers drain; every figure lands in the results JSON and the printed table.
``--at-scale`` runs these steps on the big tables.

It runs the bench as ``bench/run`` does, in ``bench/.venv-peers``; the test skips when that
venv is absent. Its database ``watchdog_bench<suffix>_flat`` (WATCHDOG_TEST_DB_SUFFIX) and
a work directory of its own keep it apart from a bench running on the same machine.
"""

import os

import pytest

from tests.bench import smoke

SUFFIX = os.environ.get("WATCHDOG_TEST_DB_SUFFIX", "") + "_flat"

pytestmark = [pytest.mark.postgres_only, pytest.mark.acceptance]

#: Every figure of the flatness workload, on empty tables and with the backlog.
FIGURES = {
    "flat_empty",
    "flat_big",
    "flatness",
    "flat_empty_default",
    "flat_big_default",
    "flatness_default",
    "flat_enqueue_new_ms_empty",
    "flat_enqueue_new_ms_big",
    "flat_enqueue_new_cost",
    "flat_enqueue_existing_ms_empty",
    "flat_enqueue_existing_ms_big",
    "flat_enqueue_existing_cost",
    "flat_enqueue_behind_ms_big",
    "flat_enqueue_behind_cost",
    *(
        f"flat_enqueue_{kind}_{counter}_{figure}"
        for kind in ("new", "existing")
        for counter in ("cpu_us", "wal_bytes", "blocks")
        for figure in ("empty", "big", "cost")
    ),
    *(
        f"flat_enqueue_behind_{counter}_{figure}"
        for counter in ("cpu_us", "wal_bytes", "blocks")
        for figure in ("big", "cost")
    ),
    "flat_status_ms_empty",
    "flat_status_ms_big",
    "flat_admin_jobs_ms_empty",
    "flat_admin_jobs_ms_big",
    "flat_admin_queues_ms_empty",
    "flat_admin_queues_ms_big",
    "flat_build_rows_per_s",
    "flat_build_s",
    "flat_analyze_s",
    "prune_deleted",
    "prune_batch_size",
    "prune_s",
    "prune_rows_per_s",
    "prune_first_batch_s",
    "prune_batch_ms",
    "prune_batch_ms_max",
    "prune_last_batch_s",
    "prune_drain_before",
    "prune_drain_during",
    "prune_drain_ratio",
}


@pytest.fixture
def bench_database():
    """Drop the smoke run's database afterwards (the bench drops and creates it first)."""
    yield
    bench = smoke.bench_module()
    import psycopg

    with psycopg.connect(dbname="postgres", autocommit=True, **bench.PG) as connection:
        connection.execute(f"DROP DATABASE IF EXISTS watchdog_bench{SUFFIX} WITH (FORCE)")


@pytest.mark.timeout(600)
def test_the_flatness_workload_measures_every_step(tmp_path, bench_database):
    command = ["--only", "watchdog", "--workloads", "flatness", "--db", "postgres"]
    done, run = smoke.run(tmp_path, SUFFIX, *command)
    assert run["failures"] == [], run["failures"]
    watchdog = run["results"]["postgres"]["watchdog"]
    assert FIGURES <= watchdog.keys(), sorted(FIGURES - watchdog.keys())
    # The oldest tenth of the 1,000 settled rows, in batches of the command's default size.
    assert watchdog["prune_deleted"]["median"] == 100
    assert watchdog["prune_batch_size"]["median"] == 1000
    # Counted, not timed: each enqueue wrote WAL of this database, most of it the job's row
    # and its index entries, and its server backend spent CPU on it.
    for state in ("empty", "big"):
        assert watchdog[f"flat_enqueue_new_wal_bytes_{state}"]["median"] > 0
        assert watchdog[f"flat_enqueue_new_server_cpu_us_{state}"]["median"] > 0
        by_relation = watchdog["flat_enqueue_wal_by_relation"][f"new_{state}"]["wal_by_relation"]
        assert {"watchdog_job", "watchdog_job_pkey", "(commit)"} <= by_relation.keys()
    table = done.stdout
    for label in (
        "| backlog flatness, default worker (big / empty) |",
        "| enqueue cost, new queue (big / empty) |",
        "| enqueue counted cost, new queue, client + server CPU (big / empty) |",
        "| enqueue counted cost, behind the busy queue, WAL, this database's records "
        "(big / existing queue, empty) |",
        "| watchdog status, in-process, big backlog (ms) |",
        "| admin job list, first page, big backlog (ms) |",
        "| admin queue list, first page, big backlog (ms) |",
        "| prune: rows deleted per second |",
        "| drain during the prune / before it |",
    ):
        assert label in table, label
