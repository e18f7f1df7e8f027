"""Real worker subprocesses against the test database (SQLite file or PostgreSQL)."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def wait_until(predicate, timeout=30.0, interval=0.02, message="condition"):
    """Poll ``predicate`` until it is truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


class Runs:
    """The run records the t-* handlers appended."""

    def __init__(self, path: Path):
        self.path = path

    def lines(self):
        """The records written so far. A handler may be mid-write while this reads: a last
        line without its newline is not complete yet, and is left for the next read."""
        if not self.path.exists():
            return []
        complete = self.path.read_text().rpartition("\n")[0]
        return [json.loads(line) for line in complete.splitlines() if line]

    def starts(self, job_id=None):
        return [r for r in self.lines() if r["event"] == "start" and job_id in (None, r["job_id"])]

    def ends(self, job_id=None):
        return [r for r in self.lines() if r["event"] == "end" and job_id in (None, r["job_id"])]

    def overlaps(self):
        """(queue, earlier job, later job) for each two consecutive runs of one queue where
        the later started before the earlier ended: a serial queue has none. Call it once
        every run has ended."""
        lines = self.lines()
        ended = {
            (r["job_id"], r["recovery_count"]): r["time"] for r in lines if r["event"] == "end"
        }
        by_queue = defaultdict(list)
        for record in lines:
            if record["event"] == "start":
                by_queue[record["queue"]].append(record)
        found = []
        for queue, records in by_queue.items():
            records.sort(key=lambda r: r["time"])
            for earlier, later in zip(records, records[1:], strict=False):
                if ended[earlier["job_id"], earlier["recovery_count"]] > later["time"]:
                    found.append((queue, earlier["job_id"], later["job_id"]))
        return found


class WorkerProcess:
    def __init__(self, popen: subprocess.Popen, log_path: Path):
        self.popen = popen
        self.log_path = log_path

    @property
    def pid(self):
        return self.popen.pid

    def output(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def signal(self, signum):
        self.popen.send_signal(signum)

    def wait(self, timeout=60):
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"worker did not exit; output:\n{self.output()}") from None


@pytest.fixture
def runs(tmp_path):
    return Runs(tmp_path / "runs.jsonl")


@pytest.fixture
def spawn_worker(tmp_path, runs):
    """Start ``manage.py watchdog_worker`` with the given arguments against the test DB."""
    started: list[WorkerProcess] = []

    def spawn(*args: str, env: dict | None = None, wrap: tuple[str, ...] = ()) -> WorkerProcess:
        """``wrap``: a command to run the worker under (e.g. ``unshare``), ending in one
        that takes the worker's command line as its arguments."""
        environment = os.environ.copy()
        environment.update(
            WATCHDOG_DB_NAME=str(connection.settings_dict["NAME"]),
            WATCHDOG_TEST_LOG=str(runs.path),
            DJANGO_SETTINGS_MODULE="tests.settings",
            PYTHONUNBUFFERED="1",
        )
        environment.update(env or {})
        log_path = tmp_path / f"worker-{len(started)}.log"
        popen = subprocess.Popen(
            [
                *wrap,
                sys.executable,
                "-m",
                "django",
                "watchdog_worker",
                "--log-level",
                "DEBUG",
                *args,
            ],
            cwd=ROOT,
            env=environment,
            stdout=log_path.open("w"),
            stderr=subprocess.STDOUT,
        )
        process = WorkerProcess(popen, log_path)
        started.append(process)
        return process

    yield spawn
    for process in started:
        if process.popen.poll() is None:
            process.popen.send_signal(signal.SIGKILL)
            process.popen.wait()


@pytest.fixture(autouse=True)
def _close_connection_after():
    yield
    connection.close()
