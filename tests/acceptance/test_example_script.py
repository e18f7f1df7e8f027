"""scripts/example as a newcomer runs it: a light venv of its own, installed once; the site
and a supervised worker; a build survives its worker being killed (max_recoveries=2)."""

import os
import signal
import socket
import sqlite3
import subprocess
import urllib.request
from pathlib import Path

import pytest

from .conftest import wait_until

ROOT = Path(__file__).resolve().parents[2]

#: Seconds for scripts/example to serve its site, installing .venv-example first when it
#: is missing (scripts/test installs it beforehand, as a phase of its own): a download on a
#: busy machine, so the test's own time limit is raised above it.
FIRST_START = 600

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.timeout(FIRST_START + 300),
    # The example keeps its own SQLite file: one run is enough, whatever the test database.
    pytest.mark.skipif(
        os.environ.get("WATCHDOG_TEST_DB", "sqlite") != "sqlite",
        reason="the example runs on its own SQLite file; run once, with the SQLite suite",
    ),
]


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Example:
    def __init__(self, tmp_path, name):
        self.db = tmp_path / "example.sqlite3"
        self.port = _free_port()
        self.log = tmp_path / f"{name}.log"
        env = {
            **os.environ,
            "EXAMPLE_PORT": str(self.port),
            "EXAMPLE_SQLITE_PATH": str(self.db),
        }
        for name in ("DATABASE_URL", "DJANGO_SETTINGS_MODULE"):  # pytest's own
            env.pop(name, None)
        self.env = env
        self.popen = subprocess.Popen(
            ["bash", "scripts/example"],
            cwd=ROOT,
            env=env,
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def output(self):
        return self.log.read_text()

    def query(self, sql, *params):
        with sqlite3.connect(self.db, timeout=20) as db:
            return db.execute(sql, params).fetchall()

    def serving(self):
        if self.popen.poll() is not None:
            raise AssertionError(f"scripts/example exited:\n{self.output()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/", timeout=5) as page:
                return page.status == 200
        except OSError:
            return False

    def stop(self):
        """SIGTERM, as a supervisor would send: the script stops the server and the worker."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            raise AssertionError(f"scripts/example did not stop:\n{self.output()}") from None


def test_the_example_installs_once_runs_and_recovers_a_build_whose_worker_was_killed(tmp_path):
    killed = None
    example = Example(tmp_path, "first")
    try:
        wait_until(example.serving, timeout=FIRST_START, message=f"the site\n{example.output()}")
        assert "== django-watchdog example is running" in example.output()
        wait_until(
            lambda: example.query("SELECT pid FROM watchdog_worker"),
            timeout=60,
            message=f"the worker to register\n{example.output()}",
        )
        subprocess.run(
            [
                str(ROOT / ".venv-example" / "bin" / "python"),
                "example_project/manage.py",
                "shell",
                "-v",
                "0",
                "-c",
                "from django.db import transaction\n"
                "from reports.models import Report\n"
                "from reports.views import enqueue_build\n"
                "with transaction.atomic():\n"
                "    enqueue_build(Report.objects.create(title='crash demo', seconds=3))\n",
            ],
            cwd=ROOT,
            env=example.env,
            check=True,
        )
        job = "report-1-build-1"
        running = "SELECT claimed_by FROM watchdog_job WHERE job_id = ? AND state = 'running'"
        first = wait_until(
            lambda: example.query(running, job), timeout=60, message="the build to run"
        )
        killed = first[0][0]
        (pid,) = example.query("SELECT pid FROM watchdog_worker WHERE worker_id = ?", killed)[0]
        os.kill(pid, signal.SIGKILL)

        wait_until(
            lambda: example.query(
                "SELECT 1 FROM watchdog_job WHERE job_id = ? AND state = 'settled'"
                " AND outcome = 'completed' AND recovery_count = 1",
                job,
            ),
            timeout=60,
            message=f"the build to be recovered and completed\n{example.output()}",
        )
        assert "the worker died" in example.output()
        assert "status=requeued recovery_count=1" in example.output()
    finally:
        status = example.stop()
    assert status == 143, example.output()  # stopped by SIGTERM, after stopping its children
    assert "== stopping the web server and the worker" in example.output()
    # The supervised worker deregistered; only the killed one's row is left (for reaping).
    assert example.query("SELECT worker_id FROM watchdog_worker") == [(killed,)]

    again = Example(tmp_path, "second")
    try:
        wait_until(again.serving, timeout=120, message=f"the site again\n{again.output()}")
        assert "already has django-watchdog[example]: nothing to install" in again.output()
    finally:
        again.stop()
