"""Same-host liveness from a worker's process: dead, alive, or "ask the heartbeat"."""

import os
import signal
import subprocess
import sys
from datetime import timedelta

import pytest

from django_watchdog.engine import liveness

linux_only = pytest.mark.skipif(
    not os.path.exists("/proc/self/stat"), reason="process start times come from /proc"
)
HERE = liveness.this_host()


@pytest.fixture
def sleeper():
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    if process.poll() is None:
        process.kill()
        process.wait()


def test_this_process_is_alive_and_another_host_is_unknown():
    started = liveness.started_at() or liveness.started_at(os.getpid())
    assert liveness.local_verdict(HERE, os.getpid(), started) is True
    assert liveness.local_verdict("elsewhere", os.getpid(), started) is None


def test_a_pid_that_does_not_exist_is_dead(sleeper):
    started = liveness.started_at(sleeper.pid)
    sleeper.kill()
    sleeper.wait()
    assert liveness.local_verdict(HERE, sleeper.pid, started) is False
    assert liveness.local_verdict(HERE, 0, started) is False


@linux_only
def test_a_zombie_is_dead(sleeper):
    started = liveness.started_at(sleeper.pid)
    sleeper.kill()
    os.waitid(os.P_PID, sleeper.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    assert liveness.process(sleeper.pid).state == "Z"
    assert liveness.local_verdict(HERE, sleeper.pid, started) is False


@linux_only
def test_a_stopped_process_is_left_to_its_heartbeat(sleeper):
    """A SIGSTOPped worker cannot heartbeat or settle: after the timeout its jobs are
    recovered, and its late settle is fenced out (tests/acceptance/test_worker_crash.py)."""
    started = liveness.started_at(sleeper.pid)
    os.kill(sleeper.pid, signal.SIGSTOP)
    try:
        os.waitid(os.P_PID, sleeper.pid, os.WSTOPPED)  # returns once the kernel has stopped it
        assert liveness.process(sleeper.pid).state in "Tt"
        assert liveness.local_verdict(HERE, sleeper.pid, started) is None
    finally:
        os.kill(sleeper.pid, signal.SIGCONT)
    assert liveness.local_verdict(HERE, sleeper.pid, started) is True


@linux_only
def test_a_reused_pid_is_not_taken_for_the_worker(sleeper):
    """The row's process start differs from the live process's: another process got the
    pid after the worker died (or the row predates this rule). The heartbeat decides."""
    started = liveness.started_at(sleeper.pid)
    assert liveness.local_verdict(HERE, sleeper.pid, started) is True
    earlier = started - timedelta(minutes=5)
    assert liveness.local_verdict(HERE, sleeper.pid, earlier) is None


def test_alive_asks_the_heartbeat_only_without_a_verdict(sleeper):
    started = liveness.started_at(sleeper.pid) or liveness.started_at()
    assert liveness.alive(HERE, sleeper.pid, started, silent_s=3600, timeout=30) is True
    assert liveness.alive("elsewhere", sleeper.pid, started, silent_s=3600, timeout=30) is False
    assert liveness.alive("elsewhere", sleeper.pid, started, silent_s=29, timeout=30) is True
    sleeper.kill()
    sleeper.wait()
    assert liveness.alive(HERE, sleeper.pid, started, silent_s=0, timeout=30) is False


def test_judge_local_sorts_workers_by_verdict(sleeper):
    started = liveness.started_at(sleeper.pid) or liveness.started_at()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    verdicts = liveness.judge_local([("live", sleeper.pid, started), ("dead", gone.pid, started)])
    assert verdicts == liveness.LocalVerdicts(dead=("dead",), alive=("live",))
