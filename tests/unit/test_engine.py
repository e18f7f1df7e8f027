"""The worker engine driven step by step against a fake store: no database, no threads."""

import threading
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from django.db import OperationalError

from django_watchdog import OutcomeUnknown
from django_watchdog.domain.states import Outcome
from django_watchdog.domain.values import ClaimResult, ReconcileResult, SettleResult
from django_watchdog.engine.housekeeping import Housekeeping
from django_watchdog.engine.ports import EngineStore
from django_watchdog.engine.worker import WatchdogWorker, WorkerOptions

from .test_housekeeping import FakeHousekeepingStore


class FakeClock:
    def __init__(self):
        self.wall = datetime(2026, 12, 1, tzinfo=UTC)
        self.mono = 1000.0

    def now(self):
        return self.wall

    def monotonic(self):
        return self.mono

    def advance(self, seconds):
        self.wall += timedelta(seconds=seconds)
        self.mono += seconds


def fake_job(job_id, lane="l", payload=None, cancellation_id=None):
    return SimpleNamespace(
        job_id=job_id,
        queue=f"q-{job_id}",
        lane=lane,
        priority=0,
        payload=payload,
        recovery_count=0,
        enqueued_at=None,
        started_at=None,
        cancellation_id=cancellation_id,
        outcome=None,
        failure_reason=None,
        attempts=1,
        timeout=None,
        retry_policy=None,
        retry_at=None,
        trace_context=None,
    )


class FakeStore(EngineStore):
    """Hands out queued fake jobs; records what the engine asked for."""

    def __init__(self, jobs=(), cancelled=()):
        self.queue = list(jobs)
        self.cancelled = set(cancelled)
        self.settled = {}
        self.claims = []
        self.recoveries = 0
        self.passes = []  # how each recovery pass judged: "heartbeats" or "processes" only
        self.heartbeats = []
        self.registered = []
        self.fail_next_claim = False
        self.orphans_released = []
        self.batches = []
        self.released = []

    def claim(self, partition, *, worker_id, token=None):
        lanes = partition.lanes
        self.claims.append(tuple(lanes))
        if self.fail_next_claim:
            self.fail_next_claim = False
            raise OperationalError("server closed the connection unexpectedly")
        for job in self.queue:
            if job.lane in lanes:
                self.queue.remove(job)
                claim_token = f"{token}.1" if token else f"t-{job.job_id}"
                return ClaimResult(status="claimed", job=job, claim_token=claim_token)
        return ClaimResult(status="none")

    def settle(self, job_id, claim_token, decision, *, claim_next=None, worker_id=None, token=None):
        self.settled[job_id] = decision
        job = SimpleNamespace(
            outcome=decision.outcome.value, failure_reason=decision.failure_reason, retry_at=None
        )
        claimed = None
        if claim_next is not None:
            claimed = self.claim(claim_next, worker_id=worker_id, token=token)
        return SettleResult(status="settled", job=job), claimed

    def settle_and_claim(
        self, settlements, *, release=(), claim_next=None, limit=0, worker_id=None, token=None
    ):
        self.batches.append(
            ([s.job_id for s in settlements], [job_id for job_id, _ in release], limit)
        )
        settled = []
        for s in settlements:
            self.settled[s.job_id] = s.decision
            job = SimpleNamespace(
                outcome=s.decision.outcome.value,
                failure_reason=s.decision.failure_reason,
                retry_at=None,
            )
            settled.append(SettleResult(status="settled", job=job))
        self.released.extend(job_id for job_id, _ in release)
        claimed = []
        while claim_next is not None and len(claimed) < limit:
            result = self.claim(claim_next, worker_id=worker_id, token=token)
            if result.status == "none":
                break
            claimed.append(result)
        return settled, claimed

    def promote_due(self, *, now):
        return 0

    def next_due(self):
        return None

    def ready_probe(self, partition):
        return None

    def retries_pending(self, partition):
        return False

    def disappeared_claims(self, *, timeout, dead_workers=(), alive_workers=()):
        self.recoveries += 1
        self.passes.append("heartbeats")
        return []

    def claims_of(self, workers):
        self.recoveries += 1
        self.passes.append("processes")
        return []

    def reconcile_all(self, found):
        return []

    def register(self, worker_id, **kwargs):
        self.registered.append(worker_id)

    def heartbeat(self, worker_id):
        self.heartbeats.append(worker_id)
        return len(self.heartbeats) > 1  # the first beat finds the row reaped

    def deregister(self, worker_id):
        pass

    def reap(self, *, timeout):
        return 0

    def cancellations(self, job_ids):
        return self.cancelled & set(job_ids)

    def lanes_without_handler(self, handled):
        return ["orphan-lane"]

    def release_lost_claims(self, worker_id, tokens):
        self.orphans_released.append(tuple(tokens))
        return [], []

    def workers_on_host(self, host):
        return []

    def release_connection(self):
        pass


def make_worker(store, handlers, *, lane_options=None, **options):
    options.setdefault("heartbeat_interval", 1.0)
    options.setdefault("worker_timeout", 3.0)
    options.setdefault("shutdown_grace", 0.1)
    clock = FakeClock()
    worker = WatchdogWorker(
        WorkerOptions(worker_id="w1", **options),
        handlers=handlers,
        lane_options=lane_options,
        store=store,
        clock=clock,
        housekeeping=Housekeeping(FakeHousekeepingStore(), clock),  # no database either
    )
    worker.start(threads=False)
    return worker


def test_handler_decisions_map_to_outcomes():
    def handle(job):
        if job.payload == "fail":
            raise ValueError("bad " * 100)
        if job.payload == "unknown":
            raise OutcomeUnknown("maybe")
        return {"echo": job.payload}

    store = FakeStore(
        [
            fake_job("a", payload="x"),
            fake_job("b", payload="fail"),
            fake_job("c", payload="unknown"),
        ]
    )
    worker = make_worker(store, {"l": handle})
    assert worker.run_once() == 3
    assert store.settled["a"].outcome == Outcome.COMPLETED
    assert store.settled["a"].result == {"echo": "x"}
    assert store.settled["b"].outcome == Outcome.FAILED
    assert store.settled["b"].failure_reason.startswith("ValueError: bad bad")
    assert len(store.settled["b"].failure_reason) == 200
    assert "Traceback" in store.settled["b"].traceback
    assert store.settled["c"].outcome == Outcome.OUTCOME_UNKNOWN
    assert worker.exhausted


def test_a_result_json_cannot_hold_completes_without_a_result():
    store = FakeStore([fake_job("a")])
    make_worker(store, {"l": lambda job: object()}).run_once()
    assert store.settled["a"].outcome == Outcome.COMPLETED and store.settled["a"].result is None


def test_only_lanes_with_handlers_are_claimed_and_options_filter_them():
    store = FakeStore()
    worker = make_worker(store, {"a": print, "b": print, "c": print}, exclude_lanes=("b",))
    worker.run_once()
    assert store.claims[-1] == ("a", "c")
    worker = make_worker(store, {"a": print, "b": print}, lanes=("b", "zzz"))
    assert worker.lanes == ("b",)
    assert worker.report_unserved_lanes() == []  # "orphan-lane" was not asked for


def test_unserved_lanes_are_reported_once(caplog):
    worker = make_worker(FakeStore(), {"a": print})
    caplog.set_level("WARNING", logger="django_watchdog")
    assert worker.report_unserved_lanes() == ["orphan-lane"]
    worker.report_unserved_lanes()
    assert caplog.text.count("lane_without_handler") == 1


def test_heartbeat_reregisters_a_reaped_worker_and_flags_cancellations():
    store = FakeStore(cancelled={"a"})
    worker = make_worker(store, {"l": print})
    assert store.registered == ["w1"]
    worker.beat()
    assert store.registered == ["w1", "w1"], "the first beat found the row gone"
    from django_watchdog.engine.running import RunningJob

    running = RunningJob(fake_job("a"), claim_token="t", worker_id="w1")
    worker.holdings.track(running)
    worker.beat()
    assert running.cancel_requested


def test_recovery_runs_on_start_and_again_when_due():
    store = FakeStore()
    worker = make_worker(store, {"l": print})
    assert store.recoveries == 1
    worker.run_once()
    assert store.recoveries == 1
    worker.clock.advance(1.01)  # max(heartbeat 1.0, timeout 3.0 / 3)
    worker.run_once()
    assert store.recoveries == 2


def test_a_failed_claim_releases_orphaned_claims_before_claiming_again():
    store = FakeStore([fake_job("a")])
    worker = make_worker(store, {"l": lambda job: None})
    store.fail_next_claim = True
    with pytest.raises(OperationalError):
        worker.run_once()
    assert worker._retrying(worker.run_once) == 1
    assert len(store.orphans_released) == 1, "the failed claim's token prefix is released"
    assert "a" in store.settled


def test_database_errors_back_off_instead_of_crashing():
    store = FakeStore()
    worker = make_worker(store, {"l": print})
    waits = []
    worker._stopping.wait = waits.append  # record the backoff instead of sleeping
    store.fail_next_claim = True
    assert worker._retrying(worker.run_once) == 0
    store.fail_next_claim = True
    assert worker._retrying(worker.run_once) == 0
    assert waits == [0.1, 0.2]
    worker._retrying(worker.run_once)
    assert worker._steps.backoff.delay == 0.0, "a success resets the backoff"


def test_a_batch_is_claimed_at_once_run_in_order_and_settled_together():
    ran = []
    store = FakeStore([fake_job(name) for name in "abcde"])
    worker = make_worker(store, {"l": lambda job: ran.append(job.job_id)}, batch=3)
    assert worker.run_once() == 5
    assert ran == list("abcde")
    assert store.batches == [
        ([], [], 3),  # claim a, b, c
        (["a", "b", "c"], [], 0),  # without job threads a batch does not claim on
        ([], [], 3),  # claim d, e
        (["d", "e"], [], 0),
        ([], [], 3),  # nothing left
    ]
    assert worker.exhausted and not worker.running_jobs()


def test_a_batched_job_cancelled_before_it_starts_is_settled_cancelled_unrun():
    ran = []
    store = FakeStore([fake_job("a"), fake_job("b", cancellation_id="i-1")])
    worker = make_worker(store, {"l": lambda job: ran.append(job.job_id)}, batch=2)
    worker.run_once()
    assert ran == ["a"]
    assert store.settled["b"].outcome == Outcome.CANCELLED


def test_stopping_releases_the_jobs_a_batch_has_not_started():
    ran = []
    store = FakeStore([fake_job(name) for name in "abc"])

    def handle(job):
        ran.append(job.job_id)
        worker.stop()

    worker = make_worker(store, {"l": handle}, batch=3)
    worker.run_once()
    assert ran == ["a"]
    assert store.released == ["b", "c"]
    assert list(store.settled) == ["a"]
    assert not worker.running_jobs()


def test_recovery_judges_heartbeats_only_after_own_heartbeats_went_through_a_whole_timeout():
    store = FakeStore()
    worker = make_worker(store, {"l": print})  # timeout 3 s, heartbeat period 0.75 s
    worker._stopping.wait = lambda delay: None  # no backoff sleeps
    assert store.passes == ["processes"], "just registered: judge dead local pids only"
    for _ in range(4):
        worker.clock.advance(0.75)
        worker.beat()
    worker.recover()
    assert store.passes[-1] == "heartbeats"
    store.fail_next_claim = True
    worker._retrying(worker.run_once)
    worker.recover()
    assert store.passes[-1] == "processes", "a database failure closes the gate"
    assert not worker.heart.beat_now.is_set()
    worker._retrying(worker.run_once)
    assert worker.heart.beat_now.is_set(), "back after a failure: the heartbeat goes out at once"
    worker.beat()
    for _ in range(4):
        worker.clock.advance(0.75)
        worker.beat()
    worker.recover()
    assert store.passes[-1] == "heartbeats", "back for a whole timeout"
    worker.clock.advance(1.6)  # over timeout / 2 without a heartbeat: ours are held back
    worker.recover()
    assert store.passes[-1] == "processes"


def test_the_heartbeat_period_is_at_most_a_quarter_of_the_timeout():
    worker = make_worker(FakeStore(), {"l": print}, heartbeat_interval=1.0, worker_timeout=3.0)
    assert worker.heartbeat_period() == 0.75
    worker = make_worker(FakeStore(), {"l": print}, heartbeat_interval=1.0, worker_timeout=30.0)
    assert worker.heartbeat_period() == 1.0


def test_a_timed_out_run_whose_queue_is_held_is_settled_on_a_later_pass(caplog):
    """The main loop does not wait on another worker's lock to settle a timed-out run: it
    logs once and tries again on its next pass, even after the run's thread let it go."""
    from django_watchdog.engine.running import RunningJob
    from django_watchdog.store.waits import LockBusy

    store = FakeStore()
    held = [True]
    settle = store.settle

    def settle_unless_held(job_id, claim_token, decision, **kwargs):
        if held[0]:
            raise LockBusy("canceling statement due to lock timeout")
        return settle(job_id, claim_token, decision, **kwargs)

    store.settle = settle_unless_held
    worker = make_worker(store, {"l": print}, timeout_grace=0.5)
    running = RunningJob(fake_job("a"), claim_token="t-a", worker_id="w1")
    running.timeout = 1.0
    running.deadline = worker.clock.monotonic() + 1.0
    worker.holdings.track(running)
    worker.clock.advance(2.0)
    worker.enforce_timeouts()
    worker.enforce_timeouts()
    assert "a" not in store.settled and running.abandoned
    assert caplog.text.count("event=settle_timed_out_deferred job_id=a") == 1
    worker.holdings.untrack([running])  # its thread returned meanwhile, and let the run go
    held[0] = False
    worker.enforce_timeouts()
    assert store.settled["a"].outcome == Outcome.OUTCOME_UNKNOWN
    worker.enforce_timeouts()
    assert list(store.settled) == ["a"]


def test_recovery_logs_a_deferred_claim_once_until_it_is_reconciled(caplog):
    store = FakeStore()
    deferred = [ReconcileResult(status="deferred", job_id="held")]
    store.reconcile_all = lambda found: list(deferred)
    worker = make_worker(store, {"l": print})
    worker.recover()
    deferred.clear()
    worker.recover()
    deferred.append(ReconcileResult(status="deferred", job_id="held"))
    worker.recover()
    assert caplog.text.count("event=recover_deferred job_id=held") == 2


def test_orphans_whose_queue_is_held_are_released_on_a_later_step():
    store = FakeStore()
    answers = [([], [("a", "tok")]), (["a"], [])]
    store.release_lost_claims = lambda worker_id, tokens: answers.pop(0)
    worker = make_worker(store, {"l": print})
    worker.holdings.lose_claim("tok")
    worker.recovery.release_lost_claims()
    assert worker.holdings.lost_claims() == ["tok"], "tried again on the next step"
    worker.recovery.release_lost_claims()
    assert not worker.holdings.lost_claims() and not answers


class DueCountingStore(FakeStore):
    """Counts the looks for due delayed jobs; ``due``: when the next delayed job is due."""

    def __init__(self, jobs=()):
        super().__init__(jobs)
        self.promotions = 0
        self.due_looks = 0
        self.due = None

    def promote_due(self, *, now):
        self.promotions += 1
        return 0

    def next_due(self):
        self.due_looks += 1
        return self.due


def _idle_polls(worker, count):
    """What the main loop does when idle, ``count`` times: a step, then the idle wait."""
    for _ in range(count):
        worker.run_once()
        worker.clock.advance(worker._idle_wait())


def test_an_idle_worker_with_nothing_delayed_looks_for_due_jobs_once_per_poll():
    store = DueCountingStore()
    worker = make_worker(store, {"l": lambda job: None}, poll_interval=0.5)
    _idle_polls(worker, 4)
    # One statement per poll, not two: the idle wait's look (nothing delayed) stands for
    # the next step's.
    assert store.due_looks == 4
    assert store.promotions == 1  # the first step's, before any idle wait


def test_an_idle_worker_promotes_a_delayed_job_when_it_comes_due():
    store = DueCountingStore()
    worker = make_worker(store, {"l": lambda job: None}, poll_interval=0.5)
    _idle_polls(worker, 2)
    store.due = worker.clock.now() + timedelta(seconds=0.2)  # a delayed job was enqueued
    promotions = store.promotions
    _idle_polls(worker, 2)
    assert store.promotions > promotions


def test_an_idle_worker_with_a_waker_looks_for_due_jobs_again_only_once_woken():
    """With a waker, whatever enqueues a delayed job wakes the worker: until then the look
    that found nothing stands, and an idle poll is the claim alone."""
    store = DueCountingStore()
    worker = make_worker(store, {"l": lambda job: None}, poll_interval=0.5)
    worker._wakes_on_changes = True  # as start() with a waker thread sets it
    _idle_polls(worker, 4)
    assert store.due_looks == 1
    store.due = worker.clock.now() + timedelta(seconds=0.2)  # a delayed job was enqueued
    worker._waited(woken=True)  # its enqueue's notification
    promotions = store.promotions
    _idle_polls(worker, 2)
    assert store.due_looks == 3  # the due time is looked for until the job is promoted
    assert store.promotions > promotions


def test_a_worker_with_every_slot_busy_still_promotes_each_poll():
    store = DueCountingStore()
    worker = make_worker(store, {"l": lambda job: None}, poll_interval=0.5)
    _idle_polls(worker, 2)
    promotions = store.promotions
    worker.exhausted = False  # as after claims that filled every slot
    worker.clock.advance(worker._idle_wait())
    worker.run_once()
    assert store.promotions == promotions + 1


class LateWake(threading.Event):
    """The worker's wake event, set by the waker just after the idle wait timed out."""

    def wait(self, timeout=None):
        woken = super().wait(0)
        if not woken:
            self.set()
        return woken


def test_a_wake_just_after_the_idle_wait_timed_out_is_not_lost():
    store = DueCountingStore()
    worker = make_worker(store, {"l": lambda job: None}, poll_interval=0.5)
    worker._wakes_on_changes = True  # as start() with a waker thread sets it
    worker.wake = LateWake()
    worker.run_once()
    worker._sleep()  # nothing delayed; a delayed job's enqueue wakes it as the wait ends
    store.due = worker.clock.now() + timedelta(seconds=0.2)
    looks = store.due_looks
    for _ in range(2):  # the wait that finds the wake set, then the look it calls for
        worker.run_once()
        worker._sleep()
    assert store.due_looks == looks + 1, "the worker did not look for the due time it was told of"
