"""An idle worker costs next to nothing: its CPU time (from ``/proc``, all its threads)
while it waits for work stays far under a percent of a core, and it still wakes for a job.

CPU time hardly depends on the machine's load (unlike wall-clock figures), so the bound
can be tight enough to catch a poll loop: the SQLite waker that read ``PRAGMA
data_version`` every 5 ms cost about 4 % of a core. The measured figures are in
docs/performance.md.
"""

import os
import sys
import time

import pytest

import django_watchdog as wd
from django_watchdog.models import Worker

from .conftest import wait_until

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

#: The window measured, and the bound: generous against today's figures (well under 0.5 %
#: on both databases), tight against a poll loop.
WINDOW = 4.0
BOUND = 0.015


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_an_idle_worker_uses_almost_no_cpu_and_still_wakes_for_a_job(spawn_worker, runs):
    worker = spawn_worker(
        "--lane", "t-record", env={"DJANGO_SETTINGS_MODULE": "tests.acceptance.idle_settings"}
    )
    wd.enqueue("first", queue="a", lane="t-record")
    wait_until(lambda: runs.ends("first"), message="the first job ran")
    wait_until(lambda: Worker.objects.exists(), message="the worker registered")

    before, started = cpu_seconds(worker.pid), time.monotonic()
    time.sleep(WINDOW)  # the measured window: nothing to wait for, only time to pass
    share = (cpu_seconds(worker.pid) - before) / (time.monotonic() - started)

    wd.enqueue("second", queue="b", lane="t-record")
    wait_until(lambda: runs.ends("second"), message="the idle worker woke for a job")
    assert share < BOUND, f"an idle worker used {share:.2%} of a core"
