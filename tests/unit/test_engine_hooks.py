"""``job_started`` and ``job_finished`` for native handlers: sent outside the store's
transactions, with the outcome, duration and exception; a receiver that raises is logged
and changes nothing."""

import logging

import pytest

from django_watchdog.domain.states import Outcome
from django_watchdog.signals import job_finished, job_started

from .test_engine import FakeStore, fake_job, make_worker


class WatchingStore(FakeStore):
    """Records, at each store call, which signals had been sent by then."""

    def __init__(self, jobs, sent):
        super().__init__(jobs)
        self.sent = sent
        self.seen_at_settle = []

    def settle(self, job_id, claim_token, decision, **kwargs):
        self.seen_at_settle.append(list(self.sent))
        return super().settle(job_id, claim_token, decision, **kwargs)


@pytest.fixture
def sent():
    found = []

    def on_started(sender, *, job, worker_id, **kwargs):
        found.append(("started", job.job_id, sender.__name__, worker_id))

    def on_finished(sender, *, job, worker_id, outcome, duration, exception, **kwargs):
        found.append(("finished", job.job_id, outcome, type(exception).__name__, duration))

    job_started.connect(on_started, weak=False)
    job_finished.connect(on_finished, weak=False)
    yield found
    job_started.disconnect(on_started)
    job_finished.disconnect(on_finished)


def test_started_then_finished_after_the_settle_with_outcome_and_exception(sent):
    def handle(job):
        assert sent[-1][:2] == ("started", job.job_id), "job_started precedes the handler"
        if job.payload == "fail":
            raise KeyError("missing")
        return "ok"

    store = WatchingStore([fake_job("a"), fake_job("b", payload="fail")], sent)
    worker = make_worker(store, {"l": handle})
    worker.clock.advance(0)
    worker.run_once()
    assert [s[:4] for s in sent] == [
        ("started", "a", "handle", "w1"),
        ("finished", "a", "completed", "NoneType"),
        ("started", "b", "handle", "w1"),
        ("finished", "b", "failed", "KeyError"),
    ]
    assert all(isinstance(s[4], float) and s[4] >= 0 for s in sent if s[0] == "finished")
    # At each settle the job's job_finished was not sent yet: it follows the transaction.
    assert store.seen_at_settle[0] == [("started", "a", "handle", "w1")]


def test_a_cancelled_batch_member_that_never_ran_sends_neither(sent):
    store = FakeStore([fake_job("a"), fake_job("b", cancellation_id="i-1")])
    make_worker(store, {"l": lambda job: None}, batch=2).run_once()
    assert store.settled["b"].outcome == Outcome.CANCELLED
    assert [s[:3] for s in sent] == [("started", "a", "<lambda>"), ("finished", "a", "completed")]


def test_a_receiver_that_raises_is_logged_and_changes_nothing(caplog):
    def broken(sender, **kwargs):
        raise RuntimeError("receiver bug")

    job_started.connect(broken, weak=False)
    job_finished.connect(broken, weak=False)
    try:
        caplog.set_level(logging.ERROR, logger="django_watchdog")
        store = FakeStore([fake_job("a"), fake_job("b")])
        worker = make_worker(store, {"l": lambda job: job.job_id})
        assert worker.run_once() == 2
    finally:
        job_started.disconnect(broken)
        job_finished.disconnect(broken)
    assert store.settled["a"].outcome == Outcome.COMPLETED and store.settled["a"].result == "a"
    assert store.settled["b"].result == "b"
    failures = [r for r in caplog.records if getattr(r, "event", None) == "receiver_failed"]
    assert [(r.job_id, r.signal) for r in failures] == [
        ("a", "job_started"),
        ("a", "job_finished"),
        ("b", "job_started"),
        ("b", "job_finished"),
    ]
    assert isinstance(failures[0].exc_info[1], RuntimeError)


def test_an_abandoned_run_finishes_once_from_the_main_loop(sent):
    import threading

    from .test_engine_deadlines import GRACE, TIMEOUT, threaded_worker
    from .test_engine_faults import wait_for

    release = threading.Event()

    def handle(job):
        release.wait(timeout=30)

    store = FakeStore([fake_job("a")])
    worker = threaded_worker(store, handle)
    worker.run_once()
    wait_for(lambda: sent, message="a to start")
    worker.clock.advance(TIMEOUT + GRACE + 0.01)
    worker.enforce_timeouts()
    assert [s[:3] for s in sent] == [
        ("started", "a", "handle"),
        ("finished", "a", "outcome_unknown"),
    ]
    release.set()
    wait_for(lambda: not worker.holdings.running_count(), message="a's thread")
    assert len(sent) == 2
