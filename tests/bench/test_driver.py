"""``bench.driver``'s operations, run as ``bench/run`` runs them (a subprocess in
``bench/.venv-peers``, on SQLite files in a directory of the test's own)."""

import json
import os
import sqlite3
import subprocess

import pytest
from django.db import connection

from django_watchdog.api import MAX_BULK
from tests.bench import smoke

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite run only"),
]


def drive(tmp_path, op, **arguments):
    """``bench.driver watchdog sqlite OP ARGUMENTS``: what it printed."""
    if not smoke.PEERS_PYTHON.exists():
        pytest.skip("bench/.venv-peers is absent: bench/run builds it")
    done = subprocess.run(
        [smoke.PEERS_PYTHON, "-m", "bench.driver", "watchdog", "sqlite", op, json.dumps(arguments)],
        cwd=smoke.ROOT,
        env={
            **os.environ,
            "PYTHONPATH": str(smoke.ROOT),
            "BENCH_SQLITE_DIR": str(tmp_path),
            "BENCH_STAMP_FILE": str(tmp_path / "stamps.txt"),
        },
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_prefill_of_more_jobs_than_one_enqueue_many_takes_enqueues_them_all(tmp_path) -> None:
    # The prune's feeder asks for as many jobs as the workers drain in 10 s: past
    # MAX_BULK at a fast drain rate, which one enqueue_many call refuses.
    drive(tmp_path, "setup")
    n = MAX_BULK + 5
    assert "commit" in drive(tmp_path, "prefill", n=n, queues=5, tag="t")
    with sqlite3.connect(tmp_path / "watchdog_bench.sqlite3") as database:
        stored = database.execute("SELECT COUNT(*), COUNT(DISTINCT queue) FROM watchdog_job")
        assert stored.fetchone() == (n, 5)
