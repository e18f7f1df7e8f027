"""The worker engine under faults, against a fake store: poison outcomes, a failing
housekeeping step, a lost claim acknowledgement, a stop requested mid-job (SPEC §9)."""

import threading
import time

import pytest
from django.db import DataError, OperationalError

from django_watchdog.domain.states import Outcome

from .test_engine import FakeStore, fake_job, make_worker

NUL = "page 1\x00page 2"


def wait_for(predicate, timeout=10.0, message="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.005)
    raise AssertionError(f"timed out waiting for {message}")


def _refuses(decision):
    """What a strict database does with text it cannot hold (PostgreSQL and NUL)."""
    texts = [decision.failure_reason or "", decision.traceback or "", repr(decision.result)]
    return any("poison" in text for text in texts)


class StrictStore(FakeStore):
    """Refuses any decision mentioning "poison" as PostgreSQL refuses a NUL: a DataError
    that rolls the whole write back (a batch's other members too)."""

    def settle(self, job_id, claim_token, decision, *, claim_next=None, worker_id=None, token=None):
        if _refuses(decision):
            raise DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        return super().settle(
            job_id, claim_token, decision, claim_next=claim_next, worker_id=worker_id, token=token
        )

    def settle_and_claim(
        self, settlements, *, release=(), claim_next=None, limit=0, worker_id=None, token=None
    ):
        if any(_refuses(s.decision) for s in settlements):
            raise DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        return super().settle_and_claim(
            settlements,
            release=release,
            claim_next=claim_next,
            limit=limit,
            worker_id=worker_id,
            token=token,
        )


def _deep(depth=100_000):
    value = []
    for _ in range(depth):
        value = [value]
    return value


def test_a_result_nested_too_deeply_completes_without_it_and_the_worker_goes_on():
    store = FakeStore([fake_job("deep"), fake_job("next")])
    worker = make_worker(store, {"l": lambda job: _deep() if job.job_id == "deep" else "ok"})
    assert worker.run_once() == 2
    assert store.settled["deep"].outcome == Outcome.COMPLETED
    assert store.settled["deep"].result is None
    assert "nested too deeply" in store.settled["deep"].traceback
    assert store.settled["next"].result == "ok"


def test_a_nul_in_a_result_or_in_exception_text_settles_once_storably():
    def handle(job):
        if job.payload == "raise":
            raise ValueError(NUL)
        return {"text": NUL}

    store = FakeStore([fake_job("r"), fake_job("e", payload="raise")])
    make_worker(store, {"l": handle}).run_once()
    assert store.settled["r"].outcome == Outcome.COMPLETED and store.settled["r"].result is None
    assert store.settled["e"].failure_reason == "ValueError: page 1\\x00page 2"


def test_an_outcome_the_database_refuses_settles_failed_saying_so(caplog):
    store = StrictStore([fake_job("a"), fake_job("b")])

    def handle(job):
        if job.job_id == "a":
            raise ValueError("poison")
        return "fine"

    worker = make_worker(store, {"l": handle})
    caplog.set_level("WARNING", logger="django_watchdog")
    assert worker.run_once() == 2
    a = store.settled["a"]
    assert a.outcome == Outcome.FAILED
    assert a.failure_reason.startswith("Outcome could not be stored: DataError: PostgreSQL text")
    assert store.settled["b"].result == "fine"
    assert "outcome_unstorable" in caplog.text
    assert not worker.running_jobs()


def test_one_refused_outcome_in_a_batch_does_not_hold_back_the_others():
    store = StrictStore([fake_job(name) for name in "abc"])

    def handle(job):
        if job.job_id == "b":
            raise ValueError("poison")
        return job.job_id

    worker = make_worker(store, {"l": handle}, batch=3)
    worker.run_once()
    assert store.settled["a"].result == "a" and store.settled["c"].result == "c"
    assert store.settled["b"].outcome == Outcome.FAILED
    assert store.settled["b"].failure_reason.startswith("Outcome could not be stored")
    assert not worker.running_jobs()


def test_a_batch_thread_whose_job_cannot_be_decided_settles_and_claims_again(monkeypatch):
    from django_watchdog.domain import decisions

    def broken(value):
        raise RuntimeError("decision code has a bug")

    monkeypatch.setattr(decisions, "from_return", broken)
    store = FakeStore([fake_job("a"), fake_job("b")])
    worker = make_worker(store, {"l": lambda job: "x"}, batch=1)
    worker.run_once()
    assert store.settled["a"].outcome == Outcome.FAILED
    assert "RuntimeError: decision code has a bug" in store.settled["a"].failure_reason
    assert store.settled["b"].outcome == Outcome.FAILED, "the worker kept claiming"
    assert worker.free_slots() == 1 and not worker.running_jobs()


def test_a_housekeeping_step_that_keeps_failing_never_stops_claiming(caplog):
    store = FakeStore([fake_job("a")])
    worker = make_worker(store, {"l": lambda job: "done"})
    calls = []

    def failing(now):
        calls.append(now)
        raise OverflowError("date value out of range")

    worker.housekeeping.scheduler.run_due = failing
    caplog.set_level("ERROR", logger="django_watchdog")
    assert worker.run_once() == 1
    assert store.settled["a"].result == "done"
    assert "housekeeping_failed" in caplog.text
    store.queue.append(fake_job("b"))
    assert worker.run_once() == 1, "a failing step is backed off on its own"
    assert len(calls) == 1
    worker.clock.advance(60)
    worker.run_once()
    assert len(calls) == 2, "and tried again once its backoff has passed"


class LosingStore(FakeStore):
    """Commits the claim made with the next settle of ``lose``, then loses the answer."""

    def __init__(self, jobs, lose):
        super().__init__(jobs)
        self.lose = lose
        self.running = {}  # job id -> claim token, as the database holds them
        self.lost = threading.Event()

    def claim(self, partition, *, worker_id, token=None):
        result = super().claim(partition, worker_id=worker_id, token=token)
        if result.job is not None:
            self.running[result.job.job_id] = result.claim_token
        return result

    def settle(self, job_id, claim_token, decision, *, claim_next=None, worker_id=None, token=None):
        self.running.pop(job_id, None)
        settled, claimed = super().settle(
            job_id, claim_token, decision, claim_next=claim_next, worker_id=worker_id, token=token
        )
        if job_id == self.lose and claim_next is not None and not self.lost.is_set():
            self.lost.set()
            raise OperationalError("server closed the connection unexpectedly")
        return settled, claimed

    def release_lost_claims(self, worker_id, tokens):
        released = []
        for job_id, held in list(self.running.items()):
            if any(held.startswith(f"{token}.") for token in tokens):
                del self.running[job_id]
                self.queue.insert(0, fake_job(job_id))
                released.append(job_id)
        self.released.extend(released)
        return released, []


def test_a_lost_claim_acknowledgement_is_released_while_the_worker_stays_busy():
    gate = threading.Event()
    ran = []

    def handle(job):
        ran.append(job.job_id)
        if job.job_id == "busy":
            gate.wait(timeout=30)
        return job.job_id

    store = LosingStore([fake_job("busy"), fake_job("b"), fake_job("orphan")], lose="b")
    worker = make_worker(store, {"l": handle}, concurrency=2)
    worker.jobs.threaded = True  # job threads claim on as they settle, as in a real worker
    try:
        worker.run_once()  # "busy" and "b" start; b's settle claims "orphan", unseen
        wait_for(store.lost.is_set, message="the lost acknowledgement")
        wait_for(lambda: "b" in store.settled and worker.running_count() == 1, message="b done")
        assert "orphan" in store.running and "orphan" not in ran
        worker.run_once()  # "busy" still runs
        assert store.released == ["orphan"]
        wait_for(lambda: "orphan" in store.settled, message="the released job to run")
        assert ran.count("orphan") == 1
    finally:
        gate.set()
        wait_for(lambda: not worker.running_count(), message="busy to finish")


def test_no_chained_claim_after_a_stop_is_requested_during_the_job():
    store = FakeStore([fake_job("a"), fake_job("b")])
    ran = []

    def handle(job):
        ran.append(job.job_id)
        worker.request_stop()  # what the SIGTERM relay does

    worker = make_worker(store, {"l": handle})
    worker.jobs.threaded = True
    first = store.claim(worker.partition, worker_id="w1")
    worker.jobs.run_chain(worker.claimer.accept(first))
    assert ran == ["a"]
    assert [job.job_id for job in store.queue] == ["b"], "b was never claimed"


def test_no_chained_batch_claim_after_a_stop_is_requested_during_the_batch():
    store = FakeStore([fake_job("a"), fake_job("b")])
    ran = []

    def handle(job):
        ran.append(job.job_id)
        worker.request_stop()

    worker = make_worker(store, {"l": handle}, batch=1)
    worker.batches.threaded = True
    _, claimed = store.settle_and_claim([], claim_next=worker.partition, limit=1)
    from django_watchdog.engine.batches import Batch

    worker.batches.dispatch(Batch(worker.claimer.accept_all(claimed)))
    wait_for(lambda: "a" in store.settled, message="a settled")
    wait_for(lambda: not worker.holdings.batches(), message="the batch thread to end")
    assert ran == ["a"]
    assert [job.job_id for job in store.queue] == ["b"]
    assert store.batches[-1][2] == 0, "the last write claimed nothing"


def test_a_claim_lost_just_before_stopping_is_released_on_the_way_out():
    store = FakeStore([fake_job("a")])
    worker = make_worker(store, {"l": print})
    store.fail_next_claim = True
    with pytest.raises(OperationalError):
        worker.run_once()
    worker.stop()
    worker.shutdown()
    assert len(store.orphans_released) == 1, "released before deregistering"


class FlakyHeartbeatStore(FakeStore):
    """A heartbeat that fails once with something other than a database error."""

    def heartbeat(self, worker_id):
        if not getattr(self, "failed_once", False):
            self.failed_once = True
            raise RuntimeError("a bug somewhere under the heartbeat")
        return super().heartbeat(worker_id)


def test_the_heartbeat_thread_survives_an_error_that_is_not_the_databases():
    store = FlakyHeartbeatStore([])
    worker = make_worker(store, {}, heartbeat_interval=0.01, worker_timeout=1.0)
    beats = len(store.heartbeats)
    heart = threading.Thread(target=worker.heart.loop, daemon=True)
    heart.start()
    try:
        wait_for(lambda: len(store.heartbeats) >= beats + 2, message="beats after the error")
    finally:
        worker.stop()
        heart.join(timeout=10)
    assert store.failed_once
    assert not heart.is_alive()
