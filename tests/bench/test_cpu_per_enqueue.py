"""``bench.cpu_per_enqueue`` runs on the database server under test: it finds the server
process or thread serving each driver's connection, counts every case of both systems, and
prints a row of figures for each.

It runs as ``bench/run`` would, in ``bench/.venv-peers`` (django-tasks-db lives there); the
test skips when that venv is absent. Databases named with a suffix of their own
(WATCHDOG_TEST_DB_SUFFIX) and a work directory of its own keep it apart from a bench
running on the same machine. Tiny counts: it proves the mode runs, its figures mean nothing.
"""

import os
import subprocess

import pytest
from django.db import connection

from tests.bench import smoke

SUFFIX = os.environ.get("WATCHDOG_TEST_DB_SUFFIX", "") + "_cpu"

pytestmark = pytest.mark.acceptance

#: Every row the table prints: watchdog's four cases, then django-tasks-db's two.
ROWS = (
    "watchdog, new queue, atomic()",
    "watchdog, new queue, autocommit",
    "watchdog, existing queue, atomic()",
    "watchdog, existing queue, autocommit",
    "django-tasks-db, atomic()",
    "django-tasks-db, autocommit",
)


@pytest.fixture
def dropped(request):
    """Drop the run's databases afterwards (the bench drops and creates them first)."""
    yield
    bench = smoke.bench_module()
    # The bench's names carry this process's BENCH_DB_SUFFIX; the run's carry SUFFIX.
    names = {
        "postgres": bench.PG_DATABASES.values(),
        "mariadb": bench.MARIADB_DATABASES.values(),
    }
    run = [name.removesuffix(bench.DB_SUFFIX) + SUFFIX for name in names[request.param]]
    if request.param == "postgres":
        import psycopg

        with psycopg.connect(dbname="postgres", autocommit=True, **bench.PG) as connection:
            for name in run:
                connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        return
    connection = bench.mariadb_admin()
    try:
        for name in run:
            connection.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        connection.close()


def counted_rows(db, tmp_path):
    """``bench.cpu_per_enqueue DB`` with 3 enqueues per case in 2 chunks: its table's rows,
    label -> the figures."""
    if not smoke.PEERS_PYTHON.exists():
        pytest.skip("bench/.venv-peers is absent: bench/run builds it")
    done = subprocess.run(
        [smoke.PEERS_PYTHON, "-m", "bench.cpu_per_enqueue", db, "--enqueues", "3", "--chunks", "2"],
        cwd=smoke.ROOT,
        env={**os.environ, "BENCH_WORK_DIR": str(tmp_path), "BENCH_DB_SUFFIX": SUFFIX},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return smoke.table_rows(done.stdout, ROWS)


def assert_counted(rows, served=True):
    """Every row, each with the client's CPU and (``served``: a database server) the
    server's; SQLite has none, its work is the client's."""
    assert list(rows) == list(ROWS)
    for label, cells in rows.items():
        client, server = float(cells[0]), float(cells[1])
        assert client > 0 and (server > 0 if served else server == 0), (label, cells)
        if label.startswith("watchdog"):
            assert cells[5].endswith("x") and cells[6].endswith("x"), (label, cells)


@pytest.mark.postgres_only
@pytest.mark.parametrize("dropped", ["postgres"], indirect=True)
@pytest.mark.timeout(300)
def test_counts_each_enqueue_on_postgres(tmp_path, dropped):
    assert_counted(counted_rows("postgres", tmp_path))


@pytest.mark.mariadb_only
@pytest.mark.parametrize("dropped", ["mariadb"], indirect=True)
@pytest.mark.timeout(300)
def test_counts_each_enqueue_on_mariadb(tmp_path, dropped):
    assert_counted(counted_rows("mariadb", tmp_path))


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite run only")
@pytest.mark.timeout(300)
def test_counts_each_enqueue_on_sqlite(tmp_path):
    assert_counted(counted_rows("sqlite", tmp_path), served=False)
