"""``bench.instructions`` counts what an enqueue into SQLite costs the process under
valgrind: it runs the bench's settings twice under callgrind and prints the difference per
job. Tiny counts: it proves the tool runs, its figure means little.

It runs in ``bench/.venv-peers`` (as ``bench/run`` would) and needs ``valgrind``; the test
skips without either.
"""

import os
import re
import shutil
import subprocess

import pytest
from django.db import connection

from tests.bench import smoke

pytestmark = pytest.mark.acceptance


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite run only")
@pytest.mark.timeout(300)
def test_counts_the_instructions_of_a_bulk_enqueue():
    if not smoke.PEERS_PYTHON.exists():
        pytest.skip("bench/.venv-peers is absent: bench/run builds it")
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is missing (Debian: apt-get install valgrind)")
    done = subprocess.run(
        [smoke.PEERS_PYTHON, "-m", "bench.instructions", "--rounds", "1", "--jobs", "50"],
        cwd=smoke.ROOT,
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = re.fullmatch(
        r"watchdog bulk on SQLite: ([\d,]+) instructions a job \(1 round of 50 jobs; .*\)\n",
        done.stdout,
    )
    assert found, done.stdout
    # Far above a no-op, far below a second of work a job.
    assert 10_000 < int(found.group(1).replace(",", "")) < 100_000_000
