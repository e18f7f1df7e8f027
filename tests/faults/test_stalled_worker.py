"""A worker frozen inside a transaction that holds a queue's lock (SPEC §9 rule 16).

Worker A stalls in a ``queue_changed`` receiver while recovering a job of ``stall-q`` (the
queue's lock held, nothing committed), then is SIGSTOPped; the server never ends its
transaction (``held_settings``). Worker B must still start, drain the other queues, enforce
a timeout, recover a dead worker's job in another queue, leave ``stall-q`` (its recovery
and its due delayed job) for later, and stop promptly on SIGTERM. Resumed, A finishes what
it held. Nothing runs twice.
"""

import signal
from datetime import timedelta

import pytest
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.models import Job
from django_watchdog.store.store import Partition, Store
from tests.acceptance.conftest import wait_until

pytestmark = [
    pytest.mark.faults,
    pytest.mark.server_only,
    pytest.mark.django_db(transaction=True),
]

SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.faults.wait_settings"}


def _claimed_by_a_dead_worker(job_id, queue):
    """Enqueue ``job_id`` and claim it for a worker that never registered (so is gone)."""
    wd.enqueue(job_id, queue=queue, lane="t-record", max_recoveries=1)
    claimed = Store().claim(Partition(lanes=["t-record"]), worker_id="ghost")
    assert (claimed.status, claimed.job.job_id) == ("claimed", job_id)


def test_a_stalled_worker_holding_a_queue_lock_costs_the_others_only_that_queue(
    spawn_worker, runs, tmp_path
):
    _claimed_by_a_dead_worker("stalled-queue-job", "stall-q")  # recovered first (lower id)
    _claimed_by_a_dead_worker("dead-worker-job", "dead-q")
    # Due while A holds stall-q: B's promotion skips that queue until A's lock goes. (A never
    # promotes it: it stalls in its first recovery pass, before its main loop.)
    soon = timezone.now() + timedelta(seconds=0.3)
    wd.enqueue("delayed", queue="stall-q", lane="t-record", run_after=soon)
    stall = tmp_path / "stall"
    stall.mkdir()
    a = spawn_worker(
        env={
            "DJANGO_SETTINGS_MODULE": "tests.faults.held_settings",
            "WATCHDOG_TEST_STALL_QUEUE": "stall-q",
            "WATCHDOG_TEST_STALL_DIR": str(stall),
        }
    )
    wait_until(lambda: (stall / "stalled").exists(), message="A to stall holding stall-q's lock")
    a.signal(signal.SIGSTOP)
    try:
        for n in range(6):
            wd.enqueue(f"w{n}", queue=f"w{n}", lane="t-record", payload={"result": n})
        wd.enqueue("slow", queue="slow-q", lane="t-record", payload={"sleep": 60}, timeout=0.5)
        b = spawn_worker("--concurrency", "3", env=SETTINGS)
        for n in range(6):
            wait_until(lambda n=n: settled(f"w{n}"), message=f"B to run w{n}")
        slow = wait_until(lambda: settled("slow"), message="B to time out the slow job")
        assert (slow.outcome, slow.failure_reason) == (
            "failed",
            "TimeoutError: stopped after its 0.5 s timeout",
        )
        dead = wait_until(lambda: settled("dead-worker-job"), message="B to recover dead-q")
        assert (dead.outcome, dead.recovery_count) == ("completed", 1)
        wait_until(
            lambda: "event=recover_deferred job_id=stalled-queue-job" in b.output(),
            message="B to defer the claim whose queue A holds",
        )
        assert {r["pid"] for r in runs.starts()} == {b.pid}
        b.signal(signal.SIGTERM)
        assert b.wait() == 0, b.output()
        # All along A held stall-q: its claim and its delayed job waited, nothing else did.
        assert wd.get_job("stalled-queue-job").state == "running"
        assert Job.objects.get(job_id="delayed").delayed
    finally:
        a.signal(signal.SIGCONT)
    (stall / "release").touch()  # A commits its recovery, then promotes and runs
    for job_id in ("stalled-queue-job", "delayed"):
        job = wait_until(lambda j=job_id: settled(j), message=f"A to run {job_id}")
        assert job.outcome == "completed", job_id
    assert settled("stalled-queue-job").recovery_count == 1
    a.signal(signal.SIGTERM)
    assert a.wait() == 0, a.output()

    started = [r["job_id"] for r in runs.starts()]
    assert sorted(started) == sorted(
        ["dead-worker-job", "stalled-queue-job", "delayed", "slow", *(f"w{n}" for n in range(6))]
    ), "every job ran exactly once"
    assert set(Job.objects.values_list("state", flat=True)) == {"settled"}


def settled(job_id):
    job = wd.get_job(job_id)
    return job if job.state == "settled" else None
