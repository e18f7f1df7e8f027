"""A worker frozen inside a transaction that holds a queue's lock (SPEC §9 rule 16).

Worker A stalls in a ``queue_changed`` receiver while recovering a job of ``stall-q`` (the
queue's lock held, nothing committed), then is SIGSTOPped. Worker B must still start,
drain the other queues, enforce a timeout, recover a dead worker's job in another queue
and stop promptly on SIGTERM; once the server ends A's idle transaction
(``IDLE_IN_TRANSACTION_TIMEOUT``), B recovers ``stall-q`` too and promotes its delayed job.
Nothing runs twice.
"""

import signal
from datetime import timedelta

import pytest
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.models import Job
from tests.acceptance.conftest import wait_until

pytestmark = [
    pytest.mark.faults,
    pytest.mark.postgres_only,
    pytest.mark.django_db(transaction=True),
]

SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.faults.wait_settings"}


def _claimed_by_a_dead_worker(job_id, queue):
    """Enqueue ``job_id`` and claim it for a worker that never registered (so is gone)."""
    wd.enqueue(job_id, queue=queue, lane="t-record", max_recoveries=1)
    claimed = Job.objects.claim(lanes=["t-record"], worker_id="ghost")
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
            **SETTINGS,
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

        def settled(job_id):
            job = wd.get_job(job_id)
            return job if job.state == "settled" else None

        for n in range(6):
            wait_until(lambda n=n: settled(f"w{n}"), message=f"B to run w{n}")
        slow = wait_until(lambda: settled("slow"), message="B to time out the slow job")
        assert (slow.outcome, slow.failure_reason) == (
            "failed",
            "TimeoutError: stopped after its 0.5 s timeout",
        )
        dead = wait_until(lambda: settled("dead-worker-job"), message="B to recover dead-q")
        assert (dead.outcome, dead.recovery_count) == ("completed", 1)
        # The server ends A's idle transaction (IDLE_IN_TRANSACTION_TIMEOUT): its queue's
        # lock is free again, and B recovers that job too, A still stopped.
        stalled = wait_until(lambda: settled("stalled-queue-job"), message="B to recover stall-q")
        assert (stalled.outcome, stalled.recovery_count) == ("completed", 1)
        delayed = wait_until(lambda: settled("delayed"), message="B to run the delayed job")
        assert delayed.outcome == "completed"
        assert {r["pid"] for r in runs.starts()} == {b.pid}

        b.signal(signal.SIGTERM)
        assert b.wait(timeout=15) == 0, b.output()
        assert "recover_deferred" in b.output()
    finally:
        a.signal(signal.SIGCONT)
    (stall / "release").touch()
    a.signal(signal.SIGTERM)
    assert a.wait(timeout=15) == 0, a.output()

    started = [r["job_id"] for r in runs.starts()]
    assert sorted(started) == sorted(
        ["dead-worker-job", "stalled-queue-job", "delayed", "slow", *(f"w{n}" for n in range(6))]
    ), "every job ran exactly once"
    assert set(Job.objects.values_list("state", flat=True)) == {"settled"}
