"""Delayed jobs, retries with backoff and timeouts in a real worker process (issue 7)."""

import signal
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

import django_watchdog as wd
from django_watchdog import RetryPolicy
from django_watchdog.models import Job, Worker

from .conftest import wait_until

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def _stop(worker):
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


def test_a_delayed_job_blocks_nothing_and_starts_when_due(spawn_worker, runs):
    """Nothing here depends on how fast the machine is: the delayed job that must block
    nothing is due in an hour, and the worker polls once a minute, so a due job started
    within seconds of its time was woken for, whatever the load."""
    worker = spawn_worker("--poll-interval", "60")
    wait_until(Worker.objects.exists, message="the worker to register")
    with transaction.atomic():
        wd.enqueue(
            "later", queue="q", lane="t-record", run_after=timezone.now() + timedelta(hours=1)
        )
        wd.enqueue("now", queue="q", lane="t-record")
        # Read before the commit: once it commits, a worker woken at once may have run "now"
        # and the queue's head moved on before this line runs.
        assert wd.get_job("later").delayed and wd.queue_head("q").job_id == "now"
    wait_until(lambda: wd.get_job("now").state == "settled", message="the queue's other job")
    assert wd.get_job("later").delayed, "the delayed job is still waiting: it blocked nothing"

    due = timezone.now() + timedelta(seconds=1.0)
    wd.enqueue("soon", queue="q2", lane="t-record", run_after=due)
    try:
        wait_until(lambda: wd.get_job("soon").state == "settled", timeout=40, message="the due job")
    except AssertionError as late:
        raise AssertionError(f"{late}; the worker's log:\n{worker.output()}") from None
    _stop(worker)
    soon = runs.starts("soon")[0]
    assert soon["time"] >= due.timestamp()
    assert runs.starts("later") == []


def test_a_delayed_job_enters_the_order_as_if_enqueued_when_due(spawn_worker, runs, tmp_path):
    gate = tmp_path / "blocker-may-end"
    wd.enqueue(
        "early-but-delayed",
        queue="q",
        lane="t-record",
        run_after=timezone.now() + timedelta(seconds=0.3),
    )
    blocker = wd.enqueue("blocker", queue="q", lane="t-gate", payload={"gate": str(gate)})
    assert blocker.status == "queued"
    worker = spawn_worker()
    wait_until(lambda: runs.starts("blocker"), message="the blocker to start")
    # The worker gives the delayed job its place when due, while the blocker runs (until
    # the test opens its gate); a job enqueued after that comes behind it.
    wait_until(
        lambda: wd.get_job("early-but-delayed").position is not None,
        message="the delayed job to enter its queue's order",
    )
    assert runs.starts("early-but-delayed") == [], "it waits behind the running blocker"
    wd.enqueue("enqueued-after-due", queue="q", lane="t-record")
    gate.touch()
    wait_until(
        lambda: Job.objects.filter(state="settled").count() == 3,
        timeout=30,
        message="all three to settle",
    )
    _stop(worker)
    order = [r["job_id"] for r in sorted(runs.starts(), key=lambda r: r["time"])]
    assert order == ["blocker", "early-but-delayed", "enqueued-after-due"]


def test_a_retrying_job_keeps_the_head_of_its_queue_until_it_succeeds(spawn_worker, runs):
    wd.enqueue("flaky", queue="q", lane="t-flaky", payload={"fail_until": 2})
    worker = spawn_worker()
    wait_until(lambda: runs.starts("flaky"), message="the first attempt")
    # A higher-priority job arriving while the flaky one waits to retry must not overtake it.
    wd.enqueue("urgent", queue="q", lane="t-record", priority=100)
    wait_until(
        lambda: wd.get_job("urgent").state == "settled", timeout=20, message="the queue to drain"
    )
    _stop(worker)
    flaky = wd.get_job("flaky")
    assert (flaky.outcome, flaky.attempts, flaky.result) == ("completed", 3, 3)
    starts = sorted(runs.starts(), key=lambda r: r["time"])
    assert [(r["job_id"], r.get("attempt")) for r in starts] == [
        ("flaky", 1),
        ("flaky", 2),
        ("flaky", 3),
        ("urgent", None),
    ]
    gaps = [b["time"] - a["time"] for a, b in zip(starts, starts[1:3], strict=False)]
    assert all(gap >= 0.19 for gap in gaps), f"backoff not respected: {gaps}"


def test_retries_run_out_and_the_last_failure_settles_failed(spawn_worker, runs):
    wd.enqueue("doomed", queue="q", lane="t-flaky", payload={"fail_until": 99})
    worker = spawn_worker("--burst")
    wait_until(
        lambda: wd.get_job("doomed").state == "settled",
        timeout=20,
        message="the retries to run out",
    )
    worker.wait()
    job = wd.get_job("doomed")
    assert (job.outcome, job.attempts) == ("failed", 3)
    assert job.failure_reason == "ConnectionError: attempt 3 failed"
    assert len(runs.starts("doomed")) == 3


def test_a_per_job_retry_policy_overrides_the_handler_and_outcome_unknown_never_retries(
    spawn_worker, runs
):
    policy = RetryPolicy(max_attempts=2, backoff=0.05, jitter=0)
    wd.enqueue("twice", queue="a", lane="t-flaky", payload={"fail_until": 5}, retry=policy)
    wd.enqueue("unknown", queue="b", lane="t-unknown", retry=policy)
    worker = spawn_worker("--burst")
    wait_until(
        lambda: Job.objects.filter(state="settled").count() == 2,
        timeout=20,
        message="both to settle",
    )
    worker.wait()
    assert wd.get_job("twice").attempts == 2
    assert (wd.get_job("unknown").outcome, wd.get_job("unknown").attempts) == ("outcome_unknown", 1)


def test_a_timeout_turns_cancel_requested_on(spawn_worker, runs):
    wd.enqueue("slow", queue="q", lane="t-record", payload={"sleep": 30}, timeout=0.3)
    worker = spawn_worker()
    wait_until(
        lambda: wd.get_job("slow").state == "settled",
        timeout=20,
        message="the timed-out job to settle",
    )
    _stop(worker)
    job = wd.get_job("slow")
    assert job.outcome == "failed"
    assert job.failure_reason == "TimeoutError: stopped after its 0.3 s timeout"
    assert runs.ends("slow")[0]["cancel_requested"] is True


def test_a_job_claimed_with_the_previous_settle_still_times_out_on_time(spawn_worker, runs):
    """The job thread claims "timed" in the transaction that settles "first"; the main loop,
    asleep for its long poll interval, must still learn of the new deadline."""
    wd.enqueue("first", queue="a", lane="t-record", priority=1, payload={"sleep": 0.3})
    wd.enqueue("timed", queue="b", lane="t-record", payload={"sleep": 30}, timeout=0.3)
    worker = spawn_worker("--concurrency", "1", "--poll-interval", "60")
    wait_until(
        lambda: wd.get_job("timed").state == "settled",
        timeout=20,  # unwoken, the main loop would sleep 60 s and the handler run 30 s
        message="the chained job to time out",
    )
    _stop(worker)
    job = wd.get_job("timed")
    assert job.failure_reason == "TimeoutError: stopped after its 0.3 s timeout"
    assert runs.ends("timed")[0]["cancel_requested"] is True


def test_a_hung_handler_is_abandoned_outcome_unknown_and_frees_its_slot(spawn_worker, runs):
    wd.enqueue("hung", queue="a", lane="t-hang", payload={"sleep": 60}, timeout=0.2)
    wd.enqueue("next", queue="b", lane="t-record")
    worker = spawn_worker("--concurrency", "1")
    wait_until(
        lambda: wd.get_job("next").state == "settled",
        timeout=20,
        message="the other job to get the freed slot",
    )
    job = wd.get_job("hung")
    assert job.outcome == "outcome_unknown"
    assert "abandoned" in job.traceback
    _stop(worker)
