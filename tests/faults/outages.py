"""What the outage tests share: two busy workers, on one host or looking like two, taken
through a database outage longer than WORKER_TIMEOUT, and the verdict on what ran.

The verdict (SPEC §9.15): every job ran exactly once, no serial queue ran two jobs at once,
nothing was settled ``interrupted``, every handler that returned is ``completed``.
"""

import signal
import socket
import subprocess
from collections.abc import Callable

import pytest

import django_watchdog as wd
from django_watchdog.models import Job, Worker
from tests.acceptance.conftest import wait_until

SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.faults.outage_settings"}
WORKER_TIMEOUT = 2.0  # outage_settings
#: The outage lasts this long: long past WORKER_TIMEOUT and any reconnect backoff.
HOLD = 2.5 * WORKER_TIMEOUT
#: The first job of each queue runs across the outage and the reconnection after it.
ACROSS = 2 * HOLD
QUEUES = 4
JOBS_PER_QUEUE = 3

#: Same host: each worker sees the other's pid alive. Other hosts: each worker runs in a UTS
#: namespace of its own (``unshare --uts``), so only heartbeats can tell it the other lives.
HOSTS = pytest.mark.parametrize("hosts", ["same-host", "other-hosts"])


def _can_unshare() -> bool:
    try:
        done = subprocess.run(["unshare", "--uts", "true"], capture_output=True, check=False)
    except FileNotFoundError:
        return False
    return done.returncode == 0


def wrap(hosts: str, index: int) -> tuple[str, ...]:
    """The command a worker runs under: none, or one that gives it a host name of its own."""
    if hosts == "same-host":
        return ()
    if not _can_unshare():
        pytest.skip("unshare --uts is not available (needs root or user namespaces)")
    name = f"liveness-{index}"
    return ("unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', name)


def through_outage(
    spawn_worker: Callable[..., object],
    runs: object,
    hosts: str,
    outage: Callable[[float], None],
    env: dict[str, str] | None = None,
) -> None:
    """Two workers (with ``env`` added to theirs), each with two jobs running;
    ``outage(HOLD)``; then every job must settle."""
    workers = [
        spawn_worker("--concurrency", "2", env={**SETTINGS, **(env or {})}, wrap=wrap(hosts, index))
        for index in range(2)
    ]
    wait_until(lambda: Worker.objects.count() == 2, message="both workers to register")
    other = {"liveness-0", "liveness-1"}
    expected_hosts = {socket.gethostname()} if hosts == "same-host" else other
    assert set(Worker.objects.values_list("host", flat=True)) == expected_hosts
    # Both judge others by heartbeats before the outage: it must be what stops them.
    for worker in workers:
        wait_until(lambda w=worker: _gate(w.output(), "on"), message="recovery by heartbeats")
    for queue in range(QUEUES):
        for n in range(JOBS_PER_QUEUE):
            wd.enqueue(
                f"s{queue}-{n}",
                queue=f"s{queue}",
                lane="t-record",
                payload={"sleep": ACROSS if n == 0 else 0.1, "result": "done"},
                max_recoveries=3 if queue % 2 else None,
            )
    # Two slots per worker: four running jobs mean both workers are busy.
    wait_until(lambda: len(runs.starts()) == QUEUES, message="every queue's first job to start")
    assert len({r["pid"] for r in runs.starts()}) == 2
    outage(HOLD)
    total = QUEUES * JOBS_PER_QUEUE
    wait_until(
        lambda: Job.objects.filter(state="settled").count() == total,
        timeout=60,
        message="every job to settle",
    )
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait() == 0, worker.output()
    assert_ran_once_serially(runs, [w.output() for w in workers])
    for worker in workers:
        assert _gate(worker.output(), "off"), "the outage stopped recovery by heartbeats"


def _gate(output: str, state: str) -> bool:
    """Whether the worker logged turning its recovery by heartbeats ``state``."""
    return any(
        "event=recovery_by_heartbeat " in line and f" state={state} " in line
        for line in output.splitlines()
    )


def assert_ran_once_serially(runs: object, outputs: list[str]) -> None:
    starts, ends = runs.starts(), runs.ends()
    job_ids = sorted(f"s{q}-{n}" for q in range(QUEUES) for n in range(JOBS_PER_QUEUE))
    logs = "\n".join(
        line for out in outputs for line in out.splitlines() if "event=recover" in line
    )
    assert sorted(r["job_id"] for r in starts) == job_ids, f"each job ran once; {logs}"
    assert sorted(r["job_id"] for r in ends) == job_ids
    assert runs.overlaps() == [], "a serial queue ran two jobs at once"
    outcomes = dict(Job.objects.values_list("job_id", "outcome"))
    assert outcomes == dict.fromkeys(job_ids, "completed"), logs
