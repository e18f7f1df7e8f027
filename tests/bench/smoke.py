"""Running the benchmark from a test, as ``bench/run`` does: ``bench.bench --smoke`` in
``bench/.venv-peers`` (django-tasks-db and psutil live there, not in the test venv), with a
work directory and database names of its own so it runs beside a bench on the same machine.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEERS_PYTHON = ROOT / "bench" / ".venv-peers" / "bin" / "python"


def bench_module() -> ModuleType:
    """``bench.bench``, for its database names and connections."""
    sys.path.insert(0, str(ROOT))
    try:
        from bench import bench
    finally:
        sys.path.remove(str(ROOT))
    return bench


def run(
    tmp_path: Path, suffix: str, *arguments: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``bench.bench --smoke ARGUMENTS`` (databases named with ``suffix``): the finished
    process and its results JSON. Skips when ``bench/.venv-peers`` is absent."""
    if not PEERS_PYTHON.exists():
        pytest.skip("bench/.venv-peers is absent: bench/run builds it")
    results = tmp_path / "results"
    done = subprocess.run(
        [PEERS_PYTHON, "-m", "bench.bench", "--smoke", *arguments, "--results", results],
        cwd=ROOT,
        env={**os.environ, "BENCH_WORK_DIR": str(tmp_path / "work"), "BENCH_DB_SUFFIX": suffix},
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done, json.loads((results / "latest.json").read_text())


def table_rows(printed: str, labels: tuple[str, ...]) -> dict[str, list[str]]:
    """The rows of a Markdown table a tool printed whose first cell is one of ``labels``:
    that cell -> the row's other cells, in the order printed."""
    rows = {}
    for line in printed.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0] in labels:
            rows[cells[0]] = cells[1:]
    return rows


#: What a tool run from a test appends to its scratch database's name (``BENCH_DB_SUFFIX``).
TOOL_SUFFIX = os.environ.get("WATCHDOG_TEST_DB_SUFFIX", "") + "_smoke"


def scratch_database(prefix: str) -> Any:
    """A fixture: the name of the scratch database a tool run by ``run_tool`` drops and
    creates (``prefix`` plus ``TOOL_SUFFIX``), dropped after the test."""

    @pytest.fixture
    def database() -> Any:
        import psycopg

        name = prefix + TOOL_SUFFIX
        yield name
        with psycopg.connect(host="127.0.0.1", user="postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    return database


def run_tool(module: str, *arguments: str) -> str:
    """``python -m MODULE ARGUMENTS``, its scratch database's name suffixed with
    ``TOOL_SUFFIX``; what it printed, once it exited 0."""
    done = subprocess.run(
        [sys.executable, "-m", module, *arguments],
        cwd=ROOT,
        env={**os.environ, "BENCH_DB_SUFFIX": TOOL_SUFFIX},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


#: Runs of a serial queue that started before the run before them settled, or out of their
#: queue's order: none, where a loop keeps its queues' heads.
RUNS_OUT_OF_ORDER = """
SELECT count(*) FROM (
    SELECT started_at, lag(settled_at) OVER by_queue AS before,
           position, lag(position) OVER by_queue AS position_before
      FROM watchdog_job WINDOW by_queue AS (PARTITION BY queue ORDER BY started_at)
) AS runs
 WHERE started_at < before OR position < position_before
"""
