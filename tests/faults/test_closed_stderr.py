"""Signals always stop the worker, even when its stderr is a closed pipe (issue 18)."""

import os
import signal
import subprocess
import sys

import pytest
from django.db import connection

from django_watchdog.models import Worker

from ..acceptance.conftest import ROOT, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_worker_whose_stderr_reader_is_gone_still_stops_on_a_signal(tmp_path, signum):
    environment = {
        **os.environ,
        "WATCHDOG_DB_NAME": str(connection.settings_dict["NAME"]),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
    }
    with (tmp_path / "stdout.log").open("w") as stdout:
        worker = subprocess.Popen(
            [sys.executable, "-m", "django", "watchdog_worker", "--skip-checks"],
            cwd=ROOT,
            env=environment,
            stdout=stdout,
            stderr=subprocess.PIPE,
        )
    try:
        wait_until(lambda: Worker.objects.filter(pid=worker.pid).exists(), message="it registers")
        assert worker.stderr is not None
        worker.stderr.close()  # a log shipper that went away: writes to stderr now fail
        worker.send_signal(signum)
        try:
            status = worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("the worker ignored the signal") from None
        assert status == 0
        assert not Worker.objects.filter(pid=worker.pid).exists(), "it deregistered"
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
