"""Batching workers (``--batch N``): claimed jobs that never started are never lost."""

import signal

import pytest

import django_watchdog as wd
from django_watchdog.models import Job

from .conftest import wait_until

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def _batch_of_three(first_payload, first_lane="t-record", **first_options):
    """``first`` outranks two quick jobs in other queues: one batch claims all three."""
    wd.enqueue(
        "first", queue="a", lane=first_lane, priority=5, payload=first_payload, **first_options
    )
    wd.enqueue("second", queue="b", lane="t-record", priority=1)
    wd.enqueue("third", queue="c", lane="t-record", priority=0)


def test_sigterm_releases_the_jobs_a_batch_had_not_started(spawn_worker, runs):
    _batch_of_three({"sleep": 1.0, "result": "done"})
    worker = spawn_worker("--batch", "3")
    wait_until(lambda: runs.starts("first"), message="the first job to start")
    assert Job.objects.filter(state="running").count() == 3, "one claim took the batch"
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()

    assert (wd.get_job("first").outcome, wd.get_job("first").result) == ("completed", "done")
    for job_id in ("second", "third"):
        job = wd.get_job(job_id)
        assert (job.state, job.claim_token, job.attempts, job.recovery_count) == (
            "queued",
            None,
            0,
            0,
        ), "released in its place, its run uncounted"
        assert job.ready, "it is its queue's head again"
        assert not runs.starts(job_id)
    assert "event=claim_released" in worker.output()


def test_a_batched_job_cancelled_before_it_starts_settles_cancelled_unrun(spawn_worker, runs):
    _batch_of_three({"sleep": 1.5})
    worker = spawn_worker("--batch", "3")
    wait_until(lambda: runs.starts("first"), message="the first job to start")
    assert wd.cancel("second").status == "recorded", "claimed: the intent is recorded"
    wait_until(lambda: wd.get_job("third").state == "settled", timeout=20, message="the batch")
    assert wd.get_job("second").outcome == "cancelled"
    assert not runs.starts("second"), "a cancelled job that had not started never runs"
    assert wd.get_job("third").outcome == "completed"
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


def test_an_abandoned_job_does_not_hold_back_the_rest_of_its_batch(spawn_worker, runs):
    _batch_of_three({"sleep": 60}, first_lane="t-hang", timeout=0.2)
    worker = spawn_worker("--batch", "3")
    wait_until(
        lambda: wd.get_job("third").state == "settled",
        timeout=20,
        message="the rest of the batch to run after the abandonment",
    )
    assert wd.get_job("first").outcome == "outcome_unknown"
    assert [wd.get_job(j).outcome for j in ("second", "third")] == ["completed", "completed"]
    worker.signal(signal.SIGKILL)
    worker.wait()
