"""``async def`` handlers in a real worker process: completion, failure after a retry,
timeout and cancellation each cancel or settle the coroutine as for a sync handler."""

import signal

import pytest

import django_watchdog as wd

from .conftest import wait_until

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def _settled(job_id):
    wait_until(lambda: wd.get_job(job_id).state == "settled", timeout=30, message=job_id)
    return wd.get_job(job_id)


def test_async_handlers_complete_fail_after_their_retry_and_time_out(spawn_worker, runs):
    wd.enqueue("done", queue="a", lane="t-async")
    wd.enqueue("failing", queue="b", lane="t-async", payload={"mode": "fail"})
    wd.enqueue("slow", queue="c", lane="t-async", payload={"mode": "wait"}, timeout=0.3)
    worker = spawn_worker("--concurrency", "3")
    done, failing, slow = _settled("done"), _settled("failing"), _settled("slow")
    assert (done.outcome, done.result) == ("completed", {"async": "done"})
    assert (failing.outcome, failing.attempts) == ("failed", 2)
    assert failing.failure_reason == "ConnectionError: attempt 2 failed"
    assert slow.outcome == "failed"
    assert slow.failure_reason == "TimeoutError: stopped after its 0.3 s timeout"
    assert runs.ends("slow")[0]["cancelled"] is True, "the coroutine was cancelled"
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    output = worker.output()
    assert "event=settle job_id=failing queue=b lane=t-async outcome=retrying" in output
    final = output.split("event=settle job_id=failing queue=b lane=t-async outcome=failed", 1)
    assert len(final) == 2, output
    assert "Traceback" in final[1] and "ConnectionError: attempt 2 failed" in final[1]


def test_cancelling_a_running_async_handler_cancels_its_coroutine(spawn_worker, runs):
    wd.enqueue("waiting", queue="q", lane="t-async", payload={"mode": "wait"})
    worker = spawn_worker()
    wait_until(lambda: runs.starts("waiting"), message="the coroutine to start")
    assert wd.cancel("waiting").status == "recorded"
    assert _settled("waiting").outcome == "cancelled"
    assert runs.ends("waiting")[0]["cancelled"] is True
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
