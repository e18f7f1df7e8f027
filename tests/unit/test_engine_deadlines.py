"""Timeouts, abandon, the settle give-up, lost-claim release and the stuck-batch flush,
driven on a fake clock against a fake store: no database, no sleeps deciding a verdict.

The subprocess tests in tests/acceptance/test_worker_time.py cover the same paths end to
end; these reach each branch in milliseconds.
"""

import threading

from django.db import OperationalError

from django_watchdog.domain.states import Outcome
from django_watchdog.engine.settling import SETTLE_REJECTIONS
from django_watchdog.engine.worker import WatchdogWorker, WorkerOptions
from django_watchdog.handlers import HandlerOptions

from .test_engine import FakeClock, FakeStore, fake_job
from .test_engine_faults import wait_for

TIMEOUT = 1.0
GRACE = 0.5


def threaded_worker(store, handle, *, timeout=TIMEOUT, **options):
    """A started worker whose jobs run in job threads, as in production, on a fake clock;
    lane ``l`` has ``timeout`` (a lane option handed in, not read from a registry)."""
    options.setdefault("shutdown_grace", 0.0)
    worker = WatchdogWorker(
        WorkerOptions(
            worker_id="w1",
            heartbeat_interval=1.0,
            worker_timeout=3.0,
            timeout_grace=GRACE,
            **options,
        ),
        handlers={"l": handle},
        lane_options={"l": HandlerOptions(timeout=timeout)},
        store=store,
        clock=FakeClock(),
    )
    worker.start(threads=False)
    worker.jobs.threaded = worker.batches.threaded = True  # no heartbeat or waker thread
    return worker


class CountingStore(FakeStore):
    """Records every settle, so a second write for one job shows."""

    def __init__(self, jobs=()):
        super().__init__(jobs)
        self.writes = []

    def settle(self, job_id, claim_token, decision, **kwargs):
        self.writes.append((job_id, decision.outcome))
        return super().settle(job_id, claim_token, decision, **kwargs)


def test_a_run_past_its_deadline_is_asked_to_stop_and_settles_failed_for_the_timeout():
    started = threading.Event()

    def handle(job):
        started.set()
        wait_for(lambda: job.cancel_requested, message="the timeout's cancel flag")
        return "stopped early"

    store = CountingStore([fake_job("a")])
    worker = threaded_worker(store, handle)
    worker.run_once()
    wait_for(started.is_set, message="a to start")
    worker.clock.advance(TIMEOUT - 0.01)
    worker.enforce_timeouts()
    assert not worker.running_jobs()[0].cancel_requested, "not before its deadline"
    worker.clock.advance(0.02)
    worker.enforce_timeouts()
    wait_for(lambda: "a" in store.settled, message="a to settle")
    assert store.settled["a"].outcome == Outcome.FAILED
    assert store.settled["a"].failure_reason == "TimeoutError: stopped after its 1.0 s timeout"
    wait_for(lambda: not worker.running_count(), message="a's slot to free")


def test_a_run_that_ignores_its_deadline_is_abandoned_after_the_grace(caplog):
    release = threading.Event()
    started = threading.Event()

    def handle(job):
        started.set()
        release.wait(timeout=30)  # ignores cancel_requested
        return "too late"

    store = CountingStore([fake_job("a"), fake_job("b")])
    worker = threaded_worker(store, handle, concurrency=1)
    caplog.set_level("INFO", logger="django_watchdog")
    worker.run_once()
    wait_for(started.is_set, message="a to start")
    assert worker.free_slots() == 0
    worker.clock.advance(TIMEOUT + GRACE - 0.01)
    worker.enforce_timeouts()
    assert "a" not in store.settled, "still within the grace"
    worker.clock.advance(0.02)
    worker.enforce_timeouts()
    assert store.writes == [("a", Outcome.OUTCOME_UNKNOWN)]
    assert "abandoned while still executing" in store.settled["a"].traceback
    assert worker.free_slots() == 1, "the abandoned run no longer holds a slot"
    release.set()
    wait_for(lambda: "event=abandoned_run_returned job_id=a" in caplog.text, message="a back")
    assert store.writes == [("a", Outcome.OUTCOME_UNKNOWN)], "its late result is discarded"
    worker.enforce_timeouts()
    assert store.writes == [("a", Outcome.OUTCOME_UNKNOWN)], "abandoned once"


def test_a_stuck_batch_is_flushed_so_its_other_jobs_do_not_wait():
    release = threading.Event()
    started = threading.Event()

    def handle(job):
        if job.job_id == "a":
            started.set()
            release.wait(timeout=30)
        return job.job_id

    store = CountingStore([fake_job("a"), fake_job("b"), fake_job("c")])
    worker = threaded_worker(store, handle, batch=3)
    try:
        assert worker.run_once() == 3
        wait_for(started.is_set, message="a to start")
        assert worker.free_slots() == 0
        worker.clock.advance(TIMEOUT + GRACE + 0.01)
        worker.enforce_timeouts()
        assert store.settled["a"].outcome == Outcome.OUTCOME_UNKNOWN
        assert store.released == ["b", "c"], "released unstarted, not held behind a"
        assert not worker.running_jobs()
        assert worker.free_slots() == 1, "a stuck batch's thread holds no slot"
    finally:
        release.set()
    wait_for(lambda: not worker.holdings.batches(), message="the stuck thread to end")
    assert "b" not in store.settled and "c" not in store.settled, "neither ran"
    assert store.writes == [("a", Outcome.OUTCOME_UNKNOWN)]


class RejectingStore(FakeStore):
    """Every settle of ``reject`` fails as when a queue_changed receiver raises."""

    def __init__(self, jobs, reject):
        super().__init__(jobs)
        self.reject = reject
        self.attempts = 0

    def settle(self, job_id, claim_token, decision, **kwargs):
        if job_id == self.reject:
            self.attempts += 1
            raise RuntimeError("a queue_changed receiver failed")
        return super().settle(job_id, claim_token, decision, **kwargs)


def test_a_settle_refused_every_time_is_given_up_and_the_worker_goes_on(caplog):
    store = RejectingStore([fake_job("a"), fake_job("b")], reject="a")
    worker = threaded_worker(store, lambda job: job.job_id)
    worker.jobs.threaded = False  # each job to settlement in this thread
    pauses = []
    worker.settler.pause = pauses.append
    caplog.set_level("WARNING", logger="django_watchdog")
    assert worker.run_once() == 2
    assert store.attempts == SETTLE_REJECTIONS
    assert pauses == [0.1, 0.2], "backed off between attempts, not after the last"
    assert caplog.text.count("event=settlement_rejected") == SETTLE_REJECTIONS
    assert "event=settle_conflict job_id=a" in caplog.text, "given up: logged as unsettled"
    assert "a" not in store.settled
    assert store.settled["b"].result == "b", "the next job was claimed and ran"


class HoldingStore(FakeStore):
    """Remembers which claims it committed (token -> job), as the database does, and
    releases by token prefix like the real store; the first claim's answer is lost."""

    def __init__(self, jobs):
        super().__init__(jobs)
        self.held = {}
        self.lose_next_answer = False

    def claim(self, partition, *, worker_id, token=None):
        result = super().claim(partition, worker_id=worker_id, token=token)
        if result.job is not None:
            self.held[result.claim_token] = result.job.job_id
        if self.lose_next_answer and result.job is not None:
            self.lose_next_answer = False
            raise OperationalError("server closed the connection unexpectedly")
        return result

    def settle(self, job_id, claim_token, decision, **kwargs):
        self.held.pop(claim_token, None)
        return super().settle(job_id, claim_token, decision, **kwargs)

    def release_lost_claims(self, worker_id, tokens):
        self.orphans_released.append(tuple(tokens))
        released = []
        for claim_token, job_id in list(self.held.items()):
            if claim_token.rpartition(".")[0] in tokens:
                del self.held[claim_token]
                self.queue.insert(0, fake_job(job_id))
                released.append(job_id)
        self.released.extend(released)
        return released, []


def test_a_lost_claim_is_released_while_another_claim_runs_and_only_its_own_job():
    release = threading.Event()
    ran = []

    def handle(job):
        ran.append(job.job_id)
        if job.job_id == "busy":
            release.wait(timeout=30)
        return job.job_id

    store = HoldingStore([fake_job("busy")])
    worker = threaded_worker(store, handle, concurrency=2, timeout=None)
    waits = []
    worker._stopping.wait = waits.append  # the main loop's backoff, recorded
    try:
        worker.run_once()  # "busy" runs; the claim of "orphan" fails below
        wait_for(lambda: ran == ["busy"], message="busy to start")
        store.queue.append(fake_job("orphan"))
        store.lose_next_answer = True
        assert worker._retrying(worker.run_once) == 0
        assert worker.holdings.lost_claims(), "its token prefix is kept"
        assert "orphan" in store.held.values() and "orphan" not in ran
        worker._retrying(worker.run_once)  # releases it, then claims it again
        assert store.released == ["orphan"]
        assert not worker.holdings.lost_claims()
        wait_for(lambda: "orphan" in store.settled, message="the released job to run")
        assert ran.count("orphan") == 1
        assert "busy" not in store.settled, "the claim in flight was not touched"
        assert waits == [0.1]
    finally:
        release.set()
    wait_for(lambda: "busy" in store.settled, message="busy to settle")
