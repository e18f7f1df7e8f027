"""The benchmark's MariaDB path runs: ``bench.bench --smoke --db mariadb`` measures watchdog,
django-tasks-db and the floor on the MariaDB server through every workload, and prints a
MariaDB table where Procrastinate and Celery are n/a.

It runs the bench as ``bench/run`` does, in ``bench/.venv-peers`` (django-tasks-db and
psutil live there, not in the test venv); ``bench/run`` builds that venv, so the test skips
when it is absent. Databases ``bench_*<suffix>`` (WATCHDOG_TEST_DB_SUFFIX) and a work
directory of its own keep it apart from a bench running on the same machine.
"""

import os

import pytest

from tests.bench import smoke

SUFFIX = os.environ.get("WATCHDOG_TEST_DB_SUFFIX", "") + "_smoke"

pytestmark = [pytest.mark.mariadb_only, pytest.mark.acceptance]


@pytest.fixture
def bench_databases():
    """Drop the smoke run's databases afterwards (the bench drops and creates them first)."""
    yield
    bench = smoke.bench_module()
    connection = bench.mariadb_admin()
    try:
        for name in bench.MARIADB_DATABASES.values():
            connection.cursor().execute(f"DROP DATABASE IF EXISTS `{name}{SUFFIX}`")
    finally:
        connection.close()


@pytest.mark.timeout(600)
def test_the_bench_measures_every_mariadb_workload(tmp_path, bench_databases):
    done, run = smoke.run(tmp_path, SUFFIX, "--db", "mariadb")
    assert run["failures"] == [], run["failures"]
    measured = {system: set(metrics) for system, metrics in run["results"]["mariadb"].items()}
    assert measured.keys() == {"watchdog", "tasks_db", "floor"}
    for metric in ("enqueue_single", "enqueue_bulk", "drain_p2_c1", "latency_p95_ms"):
        assert metric in measured["watchdog"] & measured["tasks_db"], metric
    assert {"enqueue_single_existing", "flatness", "feed_paged"} <= measured["watchdog"]
    assert {"flatness_default", "flat_enqueue_new_cost", "flat_status_ms_big"} <= measured[
        "watchdog"
    ]
    # The single enqueue counted on MariaDB too: the client's and its server thread's CPU.
    assert {"flat_enqueue_new_cpu_us_cost", "flat_enqueue_new_server_cpu_us_big"} <= measured[
        "watchdog"
    ]
    assert {"flat_admin_jobs_ms_big", "prune_rows_per_s", "prune_drain_ratio"} <= measured[
        "watchdog"
    ]
    assert "drain_p2_c1" in measured["floor"]
    assert run["environment"]["mariadb"].startswith("10.")
    table = done.stdout
    assert "### MariaDB" in table
    assert (
        "| metric (median) | watchdog | django-tasks-db | procrastinate | celery+redis |" in table
    )
    assert "| drain, 2 processes (jobs/s) |" in table
    assert "procrastinate and celery+redis: n/a on MariaDB" in table
