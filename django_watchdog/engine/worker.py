"""The worker engine: claim ready jobs, run their handlers in threads, settle with the token.

Threads, not processes: a handler mostly waits on I/O, each thread keeps its own database
connection, and a claim or settle is one short transaction. Run more worker processes (on
one machine or many) for CPU-bound handlers or more throughput.

Threads of one worker: the caller's (claims, recovery, due jobs, timeouts, shutdown), one
heartbeat thread (liveness and cancellation intents), one waker thread (NOTIFY or SQLite
commit polling), and up to ``concurrency`` job threads, which stay for the next job and
keep their database connections (engine/threads.py). A job thread settles its job and
claims the next in the same transaction, and runs jobs until none is ready. With ``batch``
above 1 a job thread claims and settles up to that many jobs at a time (engine/batches.py).
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from django.db import DatabaseError, DataError, InterfaceError, OperationalError

from .. import handlers as registry
from ..conf import seconds, setting
from ..domain import decisions
from ..domain.errors import WatchdogError
from ..domain.retries import RetryPolicy
from ..domain.states import Outcome
from ..domain.validation import REASON_MAX
from ..domain.values import ClaimResult, Decision, SettleResult
from ..store.batches import BATCH_MAX, Settlement
from ..store.claims import Partition, new_claim_token
from ..store.worker_store import LockBusy, WorkerStore
from . import events, liveness
from .backoff import Backoff
from .batches import Batch, Decided
from .clock import Clock, SystemClock
from .gate import RecoveryGate
from .housekeeping import Housekeeping
from .running import RunningJob
from .threads import JobThreads
from .wakeup import Waker, make_waker

Handler = Callable[[RunningJob], Any]
Written = TypeVar("Written")

SETTLE_REJECTIONS = 3
#: Longest a stopping worker waits for its heartbeat thread to close its connection.
HEARTBEAT_JOIN = 5.0
#: A write the database refused for its data: the outcome is replaced by a storable one.
UNSTORABLE = (DataError, UnicodeError, RecursionError, OverflowError)


def default_worker_id() -> str:
    return f"{socket.gethostname()[:40]}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass(frozen=True, kw_only=True)
class WorkerOptions:
    """How one worker process runs; ``None`` timings come from the ``WATCHDOG`` setting."""

    lanes: tuple[str, ...] = ()
    exclude_lanes: tuple[str, ...] = ()
    concurrency: int = 1
    #: Jobs a job thread claims (and settles) at once; ``None``: ``WATCHDOG['BATCH']``.
    batch: int | None = None
    burst: bool = False
    worker_id: str = field(default_factory=default_worker_id)
    poll_interval: float | None = None
    heartbeat_interval: float | None = None
    worker_timeout: float | None = None
    shutdown_grace: float | None = None
    timeout_grace: float | None = None

    def timing(self, name: str) -> float:
        value = getattr(self, name)
        return seconds(name.upper()) if value is None else float(value)

    def batch_size(self) -> int:
        value = setting("BATCH") if self.batch is None else self.batch
        return max(1, min(BATCH_MAX, int(value)))


class WatchdogWorker:
    """Drive with ``run()`` until stopped, or step by step with ``start()``/``run_once()``."""

    def __init__(
        self,
        options: WorkerOptions,
        *,
        handlers: Mapping[str, Handler],
        using: str = "default",
        clock: Clock | None = None,
        store: WorkerStore | None = None,
    ) -> None:
        self.options = options
        self.worker_id = options.worker_id
        self.clock: Clock = clock or SystemClock()
        self.store = store or WorkerStore(using)
        self.using = using
        self.handlers = {
            lane: function
            for lane, function in handlers.items()
            if (not options.lanes or lane in options.lanes) and lane not in options.exclude_lanes
        }
        self.lanes = tuple(sorted(self.handlers))
        self.partition = Partition(lanes=self.lanes)
        self.batch_size = options.batch_size()
        self._batches: list[Batch] = []  # batch mode: one per busy job thread
        self._job_threads = JobThreads(on_exit=self.store.release_connection)
        self.wake = threading.Event()
        self._stopping = threading.Event()
        self._running: dict[str, RunningJob] = {}
        self._running_lock = threading.Lock()
        self._threads = False
        self._waker: Waker | None = None
        self._heart: threading.Thread | None = None
        self._beat_now = threading.Event()  # wakes the heartbeat thread
        timeout = options.timing("worker_timeout")
        # Another worker's heartbeat can also fall silent because the database was gone:
        # judge others only after our own heartbeats went through for a whole timeout.
        self.gate = RecoveryGate(
            self.clock, timeout=timeout, stall=timeout / 2, on_reconnect=self._beat_now.set
        )
        self._judging = False  # whether the last recovery pass judged by heartbeats
        self._next_recovery = 0.0
        self._warned_lanes: set[str] = set()
        self._deferred: set[tuple[str, str]] = set()  # (step, job id) logged as deferred
        self._timed_out_unsettled: list[RunningJob] = []  # abandoned, settle deferred
        self._backoff = Backoff()
        #: Token prefixes of claims whose commit may have succeeded unseen (see
        #: ``_release_lost_claims``), under ``_running_lock``.
        self._lost_claims: set[str] = set()
        self._promote_at = 0.0  # monotonic time of the next look for due delayed jobs
        self.exhausted = False  # the last claim found no ready job
        self.stop_requested = False  # set by a signal handler; see request_stop()
        self.abandoned: list[str] = []
        # Periodic schedules and retention (engine/housekeeping.py), ticked from run_once().
        self.housekeeping = Housekeeping(using, self.clock)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, *, threads: bool = True) -> None:
        """Register, recover what disappeared, and start the helper threads."""
        self._retrying(self._register)
        self._retrying(self.recover)
        self._retrying(self.report_unserved_lanes)
        self._threads = threads
        if threads:
            self._heart = threading.Thread(
                target=self._heartbeat_loop, name="watchdog-heartbeat", daemon=True
            )
            self._heart.start()
            self._waker = make_waker(self.using, self.wake, lambda: self.free_slots() > 0)
            if self._waker is not None:
                self._waker.start()

    def run(self) -> int:
        """Serve until ``stop()`` (or, with ``burst``, until no ready work remains); exit code."""
        self.start()
        try:
            while not self._stopping.is_set():
                if self.stop_requested:
                    self.stop()
                    break
                started = self._retrying(self.run_once)
                if self._stopping.is_set() or self.stop_requested:
                    break
                if (
                    self.options.burst
                    and self.exhausted
                    and not self.running_count()
                    and (not self.store.retries_pending(self.partition))
                ):
                    events.log(logging.INFO, "burst_done", worker=self.worker_id)
                    break
                if started and not self.exhausted and self.free_slots():
                    continue  # ready work remains: claim again without sleeping
                self.wake.wait(timeout=self._idle_wait())
                self.wake.clear()
        finally:
            self.shutdown()
        return 0

    def stop(self) -> None:
        """Stop claiming; running jobs finish within the shutdown grace. Not for signal
        handlers (it takes locks the interrupted thread may hold): use ``request_stop``."""
        self._stopping.set()
        self.wake.set()

    def request_stop(self) -> None:
        """Ask the main loop to stop at its next turn (within a poll interval; at once, and
        out of a backoff, if ``stop()`` follows: ``engine.stopping`` does both from a thread).

        Safe in a signal handler: it only sets a flag. Setting an ``Event`` there could
        deadlock on the lock of an ``Event.wait`` the handler interrupted.
        """
        self.stop_requested = True

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def _wants_work(self) -> bool:
        """Whether this worker may claim: not once a stop was requested (SIGTERM), even
        before the main loop has turned the request into ``stop()``."""
        return not (self.stop_requested or self._stopping.is_set())

    def shutdown(self) -> None:
        """Wait for running jobs up to the grace period, then deregister."""
        self._stopping.set()
        grace = self.options.timing("shutdown_grace")
        deadline = self.clock.monotonic() + grace
        while self.running_count() and self.clock.monotonic() < deadline:
            self.wake.wait(timeout=min(0.1, max(0.0, deadline - self.clock.monotonic())))
            self.wake.clear()
            self._retrying(self.enforce_timeouts)
        if self._batches:
            self._retrying(self._flush_all_batches)
        if self._lost_claims:  # else they would wait for recovery, spending its budget
            self._retrying(self._release_lost_claims)
        with self._running_lock:
            self.abandoned = sorted(self._running)
        if self.abandoned:
            events.log(
                logging.WARNING,
                "shutdown_abandoned",
                worker=self.worker_id,
                jobs=",".join(self.abandoned),
                grace_s=grace,
            )
        self._job_threads.stop()
        if self._waker is not None:
            self._waker.stop()
        if self._heart is not None:
            # Woken, its loop sees the stop and closes its connection: none is left open
            # when the process exits (on PostgreSQL, a ResourceWarning and a server session).
            self._beat_now.set()
            self._heart.join(timeout=HEARTBEAT_JOIN)
        try:
            self.store.deregister(self.worker_id)
        except DatabaseError as error:
            events.log(
                logging.WARNING, "deregister_failed", worker=self.worker_id, error=repr(error)
            )
        events.log(logging.INFO, "worker_stopped", worker=self.worker_id)

    # -- one step ----------------------------------------------------------------------

    def run_once(self) -> int:
        """Recover if due, claim into every free slot, then promote due delayed jobs (and
        claim what that readied).

        Returns how many jobs started (or settled cancelled). Without job threads
        (``start(threads=False)``) each claimed job runs to settlement here, one at a
        time: the step-by-step mode tests use.
        """
        if self.clock.monotonic() >= self._next_recovery:
            self.recover()
        self.housekeeping.run_due()  # never raises: a failing step is backed off on its own
        if self._lost_claims:
            self._release_lost_claims()
        self.enforce_timeouts()
        started = self._claim_into_free_slots()
        if self.clock.monotonic() >= self._promote_at:
            # Delayed jobs enter their queues at most a poll interval late, or on time
            # when the idle loop knew when the next one was due. After the claims, so a
            # woken worker's first round trip is its claim; what this readies is claimed
            # at once.
            promoted = self.store.promote_due(now=self.clock.now())
            self._promote_at = self.clock.monotonic() + self.options.timing("poll_interval")
            if promoted and self.free_slots():
                started += self._claim_into_free_slots()
        self._backoff.succeeded()
        return started

    def _claim_into_free_slots(self) -> int:
        """Claim ready jobs until every slot is busy or none is ready; how many started."""
        started = 0
        self.exhausted = False
        while self.free_slots() and self._wants_work():
            if self.batch_size > 1:
                taken = self._claim_batch()
                if not taken:
                    self.exhausted = True
                    break
                started += taken
                continue
            token = new_claim_token()
            try:
                result = self.store.claim(self.partition, worker_id=self.worker_id, token=token)
            except WatchdogError as error:
                self._log_skipped(error)
                continue
            except BaseException:
                self._claim_lost(token)
                raise
            running = self._accept(result)
            if running is None and result.status == "none":
                self.exhausted = True
                break
            started += 1
            if running is not None:
                self._dispatch(running)
        return started

    def _claim_batch(self) -> int:
        """Claim up to ``batch_size`` jobs in one transaction and start a thread on them."""
        token = new_claim_token()
        try:
            _, claimed = self.store.settle_and_claim(
                [],
                claim_next=self.partition,
                limit=self.batch_size,
                worker_id=self.worker_id,
                token=token,
            )
        except BaseException:
            self._claim_lost(token)
            raise
        jobs = self._accept_all(claimed)
        if jobs:
            self._dispatch_batch(Batch(jobs))
        return len(claimed)

    def _accept_all(self, claimed: list[ClaimResult | WatchdogError]) -> list[RunningJob]:
        jobs = []
        for result in claimed:
            if isinstance(result, WatchdogError):
                self._log_skipped(result)
                continue
            running = self._accept(result, start_clock=False)
            if running is not None:
                jobs.append(running)
        return jobs

    def _accept(self, result: ClaimResult, *, start_clock: bool = True) -> RunningJob | None:
        """The job a claim handed out, ready to run; ``None`` if it was settled cancelled."""
        job = result.job
        if job is None:
            return None
        if result.status == "cancelled":
            events.log(
                logging.INFO,
                "settle",
                **events.job(job),
                outcome="cancelled",
                ran=False,
            )
            return None
        assert result.claim_token is not None
        running = RunningJob(job, claim_token=result.claim_token, worker_id=self.worker_id)
        running.timeout = job.timeout or registry.options(job.lane).timeout
        if start_clock:
            self._start_clock(running)
        events.log(
            logging.DEBUG,
            "claim",
            **events.job(job),
            priority=job.priority,
            attempt=job.attempts,
            recovery_count=job.recovery_count,
        )
        return running

    def _start_clock(self, running: RunningJob) -> None:
        """The job starts now: its timeout (if any) counts from here."""
        if running.timeout is not None:
            running.deadline = self.clock.monotonic() + running.timeout

    def free_slots(self) -> int:
        if self.batch_size > 1:
            with self._running_lock:
                busy = sum(1 for batch in self._batches if not batch.stuck)
            return max(0, self.options.concurrency - busy)
        return max(0, self.options.concurrency - self.running_count())

    def running_count(self) -> int:
        with self._running_lock:
            return len(self._running)

    def running_jobs(self) -> list[RunningJob]:
        with self._running_lock:
            return list(self._running.values())

    def _idle_wait(self) -> float:
        """How long an idle main loop may sleep: the poll interval, or until something is due."""
        wait = self.options.timing("poll_interval")
        deadlines = [r.deadline for r in self.running_jobs() if r.deadline is not None]
        if deadlines:
            wait = min(wait, max(0.0, min(deadlines) - self.clock.monotonic()))
        if self.exhausted:
            try:
                due = self.store.next_due()
            except DatabaseError:
                self.gate.failed()
                due = None
            if due is not None:
                until_due = max(0.0, (due - self.clock.now()).total_seconds())
                wait = min(wait, until_due)
                self._promote_at = min(self._promote_at, self.clock.monotonic() + until_due)
        return wait

    # -- execution ---------------------------------------------------------------------

    def _dispatch(self, running: RunningJob) -> None:
        if not self._threads:
            self._run_chain(running)
            return
        with self._running_lock:
            self._running[running.job_id] = running
        self._job_threads.submit(self._job_thread, running)

    def _job_thread(self, first: RunningJob) -> None:
        try:
            self._run_chain(first, tracked=True)
        finally:
            self.wake.set()

    def _run_chain(self, first: RunningJob, *, tracked: bool = False) -> None:
        """Run ``first``, then each job claimed along with the previous settle.

        Never raises: whatever escapes a run, its job is settled ``failed`` (the thread
        must not die holding a ``running`` job). A job claimed on while a stop was being
        requested is released unstarted.
        """
        current: RunningJob | None = first
        while current is not None:
            following: RunningJob | None = None
            try:
                outcome = self._execute(current, chain=self._threads)
                if isinstance(outcome, WatchdogError):
                    self._log_skipped(outcome)
                elif outcome is not None:
                    following = self._accept(outcome)
                if following is not None and not self._wants_work():
                    self._release_unstarted([following])
                    following = None
            except Exception as error:  # noqa: BLE001 - the job must still settle
                self._worker_error(current, error)
                following = None
            finally:
                with self._running_lock:
                    if tracked and self._running.get(current.job_id) is current:
                        del self._running[current.job_id]
                    if tracked and following is not None:
                        self._running[following.job_id] = following
            current = following
            if tracked and following is not None and following.deadline is not None:
                self.wake.set()  # the main loop watches deadlines: it must see this one

    def _execute(self, running: RunningJob, *, chain: bool) -> ClaimResult | WatchdogError | None:
        """Run the lane's handler and settle its decision; with ``chain``, claim the next
        job in the same transaction, unless a stop was requested while the handler ran."""
        started = self.clock.monotonic()
        decision = self._decide(running)
        if decision is None:
            return None
        claim_next = self.partition if chain and self._wants_work() else None
        settled, claimed = self._settle(running, decision, claim_next)
        self._log_settle(running, decision, settled, self.clock.monotonic() - started)
        return claimed

    def _decide(self, running: RunningJob) -> Decision | None:
        """Run the lane's handler: its decision, or ``None`` if the run was abandoned."""
        handler = self.handlers[running.lane]
        warning = None
        try:
            value = handler(running)
        except BaseException as error:  # noqa: BLE001 - every failure is the job's outcome
            decision = self._decide_failure(running, error)
        else:
            try:
                decision, warning = decisions.from_return(value)
            except Exception as error:  # noqa: BLE001 - a result must not kill the thread
                decision = self._worker_error_decision(error)
            if running.timed_out:
                decision = Decision.failed(
                    f"TimeoutError: stopped after its {running.timeout} s timeout"
                )
        if running.abandoned:
            events.log(
                logging.WARNING,
                "abandoned_run_returned",
                **events.job(running),
                discarded=decision.outcome.value,
            )
            return None
        if warning:
            events.log(logging.WARNING, "result_dropped", job_id=running.job_id, detail=warning)
        return decision

    # -- batches (batch_size > 1) ----------------------------------------------------------

    def _dispatch_batch(self, batch: Batch) -> None:
        with self._running_lock:
            for running in batch.pending:
                self._running[running.job_id] = running
            self._batches.append(batch)
        if not self._threads:
            self._run_batches(batch)
            return
        self._job_threads.submit(self._batch_thread, batch)

    def _batch_thread(self, batch: Batch) -> None:
        try:
            self._run_batches(batch)
        finally:
            self.wake.set()

    def _run_batches(self, batch: Batch) -> None:
        """Work through ``batch``; write its results with the next claim; repeat.

        Never raises: whatever escapes, what the batch holds is written or released and
        its slot freed, so the worker goes on claiming.
        """
        current: Batch | None = batch
        while current is not None:
            following: Batch | None = None
            try:
                self._work_through(current)
                claim = self._threads and self._wants_work() and not current.stuck
                following = self._flush(current, claim=claim)
            except Exception as error:  # noqa: BLE001 - the batch must still be written
                events.log(logging.ERROR, "batch_failed", worker=self.worker_id, error=repr(error))
                logging.getLogger("django_watchdog.worker").exception("batch failed")
                self._flush(current, claim=False)
            finally:
                with self._running_lock:
                    self._batches.remove(current)
                    if following is not None:
                        self._batches.append(following)
            current = following
            self.wake.set()

    def _work_through(self, batch: Batch) -> None:
        """Run the batch's jobs in order until it is empty, stuck, or the worker stops.

        A job whose cancellation arrived before it started settles ``cancelled`` unrun; a
        failure to retry is written at once (it must reach its queue's head).
        """
        while True:
            running = batch.start_next(stopping=not self._wants_work())
            if running is None:
                return
            started = self.clock.monotonic()
            if running.cancel_requested:
                decision: Decision | None = Decision(outcome=Outcome.CANCELLED)
            else:
                self._start_clock(running)
                try:
                    decision = self._decide(running)
                except Exception as error:  # noqa: BLE001 - the job must still settle
                    decision = self._worker_error_decision(error)
            if decision is None:
                continue  # abandoned: already settled, and the batch flushed
            duration = self.clock.monotonic() - started
            if decision.retry_at is not None:
                settled, _ = self._settle(running, decision, None)
                self._log_settle(running, decision, settled, duration)
                with self._running_lock:
                    if self._running.get(running.job_id) is running:
                        del self._running[running.job_id]
                continue
            batch.decide(Decided(running, decision, duration))

    def _flush(self, batch: Batch, *, claim: bool) -> Batch | None:
        """Write the batch's decisions, release its unstarted jobs and (with ``claim``)
        claim the next batch, in one transaction; the next batch, if any was claimed."""
        decided, unstarted = batch.take()
        if not decided and not unstarted and not claim:
            return None
        settlements = [
            Settlement(d.running.job_id, d.running.claim_token, d.decision) for d in decided
        ]
        release = [(r.job_id, r.claim_token) for r in unstarted]
        following: Batch | None = None
        try:
            settled, claimed = self._write_batch(decided, settlements, release, claim=claim)
            for done, result in zip(decided, settled, strict=True):
                self._log_settle(done.running, done.decision, result, done.duration)
            for running in unstarted:
                events.log(logging.INFO, "claim_released", **events.job(running), why="unstarted")
            jobs = self._accept_all(claimed)
            if jobs:
                following = Batch(jobs)
        finally:
            with self._running_lock:
                for running in [d.running for d in decided] + unstarted:
                    if self._running.get(running.job_id) is running:
                        del self._running[running.job_id]
                if following is not None:
                    for running in following.pending:
                        self._running[running.job_id] = running
        return following

    def _write_batch(
        self,
        decided: list[Decided],
        settlements: list[Settlement],
        release: list[tuple[str, str]],
        *,
        claim: bool,
    ) -> tuple[list[SettleResult], list[ClaimResult | WatchdogError]]:
        """``store.settle_and_claim`` through outages and failing receivers.

        If the database refuses the batch (a value it cannot hold, a receiver that
        raises), each job is settled on its own (``_settle``, which stores what it can),
        then the rest is written: one bad outcome never holds back the others.
        """
        BatchWritten = tuple[list[SettleResult], list[ClaimResult | WatchdogError]]
        given_up: BatchWritten = ([SettleResult(status="conflict") for _ in settlements], [])

        def rest(settled: list[SettleResult]) -> Callable[[str | None], BatchWritten]:
            def write(token: str | None) -> BatchWritten:
                if not release and not claim:
                    return settled, []
                _, claimed = self.store.settle_and_claim(
                    [],
                    release=release,
                    claim_next=self.partition if claim else None,
                    limit=self.batch_size if claim else 0,
                    worker_id=self.worker_id,
                    token=token,
                )
                return settled, claimed

            return write

        def one_by_one(error: Exception) -> Callable[[str | None], BatchWritten] | None:
            if not decided:
                return None
            events.log(
                logging.WARNING,
                "batch_split",
                jobs=",".join(s.job_id for s in settlements),
                error=f"{type(error).__name__}: {error}",
            )
            return rest([self._settle(d.running, d.decision, None)[0] for d in decided])

        def together(token: str | None) -> BatchWritten:
            return self.store.settle_and_claim(
                settlements,
                release=release,
                claim_next=self.partition if claim else None,
                limit=self.batch_size if claim else 0,
                worker_id=self.worker_id,
                token=token,
            )

        return self._settling(
            together,
            claims=claim,
            given_up=given_up,
            instead=one_by_one,
            action="settle_batch",
            jobs=",".join(s.job_id for s in settlements),
        )

    def _flush_all_batches(self) -> None:
        """Release every batch's unstarted jobs and write its decisions (shutdown)."""
        with self._running_lock:
            batches = list(self._batches)
        for batch in batches:
            self._flush(batch, claim=False)

    def _decide_failure(self, running: RunningJob, error: BaseException) -> Decision:
        decision = decisions.from_exception(error)
        policy = self._retry_policy(running)
        if (
            decision.outcome == Outcome.FAILED
            and policy is not None
            and policy.retries(error, running.attempts)
            and not running.cancel_requested
        ):
            delay = policy.delay(running.attempts)
            decision = Decision(
                outcome=Outcome.FAILED,
                failure_reason=decision.failure_reason,
                traceback=decision.traceback,
                retry_at=self.clock.now() + timedelta(seconds=delay),
            )
        events.log(
            logging.WARNING,
            "handler_raised",
            **events.job(running),
            attempt=running.attempts,
            reason=decision.failure_reason or type(error).__name__,
            retry_at=decision.retry_at.isoformat() if decision.retry_at else None,
        )
        logging.getLogger("django_watchdog.handler").warning(
            "job %s raised:\n%s", running.job_id, decision.traceback
        )
        return decision

    def _retry_policy(self, running: RunningJob) -> RetryPolicy | None:
        stored = running.model.retry_policy
        if stored is not None:
            try:
                return RetryPolicy.from_json(stored)
            except WatchdogError as error:
                events.log(
                    logging.ERROR, "retry_policy_invalid", job_id=running.job_id, error=str(error)
                )
                return None
        return registry.options(running.lane).retry

    def _settle(
        self,
        running: RunningJob,
        decision: Decision,
        claim_next: Partition | None,
        *,
        defer_if_busy: bool = False,
    ) -> tuple[SettleResult, ClaimResult | WatchdogError | None]:
        """Settle with the claim token (and claim the next job) through outages and failing
        receivers; with ``defer_if_busy``, a queue lock held elsewhere raises ``LockBusy``
        instead of being waited out (the main loop must not wait on another worker). An
        outcome the database refuses as data (a NUL, a lone surrogate, anything the driver
        cannot encode) is replaced by a ``failed`` settle saying so."""
        Settled = tuple[SettleResult, ClaimResult | WatchdogError | None]
        given_up: Settled = (SettleResult(status="conflict"), None)

        def writing(decided: Decision) -> Callable[[str | None], Settled]:
            return lambda token: self.store.settle(
                running.job_id,
                running.claim_token,
                decided,
                claim_next=claim_next,
                worker_id=self.worker_id,
                token=token,
            )

        def storable(error: Exception) -> Callable[[str | None], Settled] | None:
            if not isinstance(error, UNSTORABLE):
                return None
            replacement = decisions.unstorable(decision, error)
            events.log(
                logging.ERROR,
                "outcome_unstorable",
                **events.job(running),
                decided=decision.outcome.value,
                reason=replacement.failure_reason,
            )
            return writing(replacement)

        return self._settling(
            writing(decision),
            claims=claim_next is not None,
            given_up=given_up,
            defer_if_busy=defer_if_busy,
            instead=storable,
            action="settle",
            **events.job(running),
        )

    def _settling(
        self,
        write: Callable[[str | None], Written],
        *,
        claims: bool,
        given_up: Written,
        defer_if_busy: bool = False,
        instead: Callable[[Exception], Callable[[str | None], Written] | None] | None = None,
        **about: Any,
    ) -> Written:
        """Run ``write`` (a settle, maybe with the next claim) until it succeeds.

        ``write`` takes the token prefix of the claim it makes (a fresh one per attempt;
        ``None`` when it claims nothing). Settling is idempotent, so through a database
        outage it is retried until the server is back; a claim made with it may have
        committed unseen, so its token goes to ``_release_lost_claims``. The first time the
        database refuses the write itself, ``instead`` may name another write to try (a
        storable outcome, a batch settled job by job). A ``queue_changed`` receiver that
        raises (anything but a lost connection) rolls the write back; it is retried a few
        times, then given up (logged) and ``given_up`` returned: the jobs stay running
        under this worker until it stops, and recovery (SPEC §4.8) resolves them then.
        """
        backoff = Backoff()
        rejected = 0
        while True:
            token = new_claim_token() if claims else None
            try:
                return write(token)
            except LockBusy:  # the transaction waited no more and rolled back: no claim
                if defer_if_busy:
                    raise
                delay = backoff.failed()  # bounded wait ran out: the lock's holder may end
            except (OperationalError, InterfaceError) as error:
                self.gate.failed()
                if token is not None:
                    self._claim_lost(token)
                delay = backoff.failed()
                events.log(
                    logging.WARNING,
                    "store_unavailable",
                    **about,
                    error=repr(error),
                    retry_in_s=delay,
                )
                self.store.release_connection()
            except Exception as error:  # noqa: BLE001 - a receiver's bug must not kill the thread
                if token is not None:
                    self._claim_lost(token)  # rolled back, unless it failed after the commit
                replacement = instead(error) if instead is not None else None
                if replacement is not None:
                    write, instead = replacement, None
                    continue
                # Anything else (a receiver's own error, an IntegrityError from its UPDATE)
                # will fail the same way again: retry a few times, then give the run up.
                rejected += 1
                events.log(
                    logging.ERROR,
                    "settlement_rejected",
                    **about,
                    attempt=rejected,
                    error=f"{type(error).__name__}: {error}",
                )
                logging.getLogger("django_watchdog.worker").exception(
                    "%s raised (a queue_changed receiver?)", about
                )
                if rejected >= SETTLE_REJECTIONS:
                    return given_up
                delay = backoff.failed()
            threading.Event().wait(delay)

    def _worker_error_decision(self, error: Exception) -> Decision:
        """A run whose outcome this worker failed to decide: ``failed``, saying why."""
        logging.getLogger("django_watchdog.worker").exception("deciding an outcome failed")
        return Decision.failed(
            f"Worker error: {decisions.failure_reason(error)}"[:REASON_MAX],
            traceback=decisions.storable_text(decisions.formatted(error)),
        )

    def _worker_error(self, running: RunningJob, error: Exception) -> None:
        """Something escaped a run: settle its job ``failed`` (a no-op if it settled)."""
        events.log(logging.ERROR, "run_failed", **events.job(running), error=repr(error))
        decision = self._worker_error_decision(error)
        try:
            settled, _ = self._settle(running, decision, None)
            self._log_settle(running, decision, settled, 0.0)
        except Exception:  # noqa: BLE001 - recovery resolves it once this worker stops
            logging.getLogger("django_watchdog.worker").exception(
                "job %s could not be settled", running.job_id
            )

    def _release_unstarted(self, jobs: list[RunningJob]) -> None:
        """Put back jobs claimed for this worker that will not start (it is stopping)."""
        release = [(r.job_id, r.claim_token) for r in jobs]
        nothing: tuple[list[SettleResult], list[ClaimResult | WatchdogError]] = ([], [])
        self._settling(
            lambda token: self.store.settle_and_claim([], release=release),
            claims=False,
            given_up=nothing,
            action="release",
            jobs=",".join(r.job_id for r in jobs),
        )
        for running in jobs:
            events.log(logging.INFO, "claim_released", **events.job(running), why="stopping")

    def _log_settle(
        self, running: RunningJob, decision: Decision, settled: SettleResult, duration: float
    ) -> None:
        job = settled.job
        if settled.status in ("settled", "replayed", "retrying") and job is not None:
            outcome = job.outcome or "retrying"
            quiet = outcome in ("completed", "cancelled")
            events.log(
                logging.DEBUG if quiet else logging.INFO,
                "settle",
                **events.job(running),
                outcome=outcome,
                reason=job.failure_reason,
                duration_s=duration,
                retry_at=job.retry_at.isoformat() if job.retry_at else None,
            )
        else:
            events.log(
                logging.WARNING,
                "settle_conflict",
                **events.job(running),
                status=settled.status,
                decided=decision.outcome.value,
                duration_s=duration,
            )

    def _log_skipped(self, error: WatchdogError) -> None:
        events.log(
            logging.ERROR, "claim_skipped", job_id=error.job_id, kind=error.kind, error=str(error)
        )

    # -- timeouts ------------------------------------------------------------------------

    def enforce_timeouts(self) -> None:
        """Past a job's deadline turn ``cancel_requested`` on; past the grace, give up on it.

        Giving up settles the job ``outcome_unknown`` (the handler may still be changing
        things) and frees its slot; the abandoned thread's eventual result is discarded.
        """
        now = self.clock.monotonic()
        grace = self.options.timing("timeout_grace")
        unsettled, self._timed_out_unsettled = self._timed_out_unsettled, []
        running_now = [r for r in self.running_jobs() if r not in unsettled]
        for running in unsettled + running_now:
            if running.deadline is None or now < running.deadline:
                continue
            if not running.timed_out:
                events.log(
                    logging.WARNING,
                    "timeout",
                    **events.job(running),
                    timeout_s=running.timeout,
                )
                running.timed_out = True
                running.request_cancel()
            if now >= running.deadline + grace and (not running.abandoned or running in unsettled):
                running.abandoned = True
                decision = Decision(
                    outcome=Outcome.OUTCOME_UNKNOWN,
                    traceback=f"Timed out after {running.timeout} s and did not stop within "
                    f"{grace} s; the run was abandoned while still executing.",
                )
                try:
                    settled, _ = self._settle(running, decision, None, defer_if_busy=True)
                except LockBusy:
                    # Its queue is held by another transaction: settle on a later pass (the
                    # abandoned run may leave the running set meanwhile; keep it here).
                    self._timed_out_unsettled.append(running)
                    self._log_deferred("settle_timed_out", running.job_id)
                    continue
                self._deferred.discard(("settle_timed_out", running.job_id))
                with self._running_lock:
                    self._running.pop(running.job_id, None)
                    stuck = [b for b in self._batches if b.current is running]
                self._log_settle(running, decision, settled, running.timeout or 0.0)
                for batch in stuck:
                    batch.stuck = True
                    self._flush(batch, claim=False)  # the rest of it must not wait on this one

    # -- liveness and recovery -----------------------------------------------------------

    def _register(self) -> None:
        self.store.register(
            self.worker_id,
            started_at=liveness.started_at() or self.clock.now(),
            lanes=self.lanes,
            exclude_lanes=self.options.exclude_lanes,
            concurrency=self.options.concurrency,
        )
        self.gate.beat()

    def beat(self) -> None:
        """Heartbeat (re-registering if reaped) and refresh running jobs' cancellation flags."""
        if self.store.heartbeat(self.worker_id):
            self.gate.beat()
        else:
            events.log(logging.WARNING, "worker_reregistered", worker=self.worker_id)
            self._register()
        running = self.running_jobs()
        if running:
            cancelled = self.store.cancellations(r.job_id for r in running)
            for job in running:
                if job.job_id in cancelled and not job.cancel_requested:
                    events.log(
                        logging.INFO,
                        "cancel_requested",
                        **events.job(job),
                    )
                    job.request_cancel()

    def heartbeat_period(self) -> float:
        """Seconds between heartbeats: ``HEARTBEAT_INTERVAL``, at most a quarter of the
        timeout (the recovery gate's margin, engine/gate.py)."""
        return min(
            self.options.timing("heartbeat_interval"), self.options.timing("worker_timeout") / 4
        )

    def _heartbeat_loop(self) -> None:
        """Beat every period; through an outage retry at least as often, and at once when
        the main loop got through, so the heartbeat never lags the rest of the worker."""
        period = self.heartbeat_period()
        backoff = Backoff()
        while not self._stopping.is_set():
            try:
                self.beat()
                backoff.succeeded()
                wait = period
            except DatabaseError as error:
                self.gate.failed()
                wait = min(backoff.failed(), period)
                events.log(
                    logging.WARNING,
                    "liveness_unavailable",
                    worker=self.worker_id,
                    error=repr(error),
                    retry_in_s=wait,
                )
                self.store.release_connection()
            except Exception as error:  # noqa: BLE001 - a bug must not end liveness for good
                # Without beats, other hosts would recover this live worker's jobs.
                self.gate.failed()
                wait = min(backoff.failed(), period)
                events.log(
                    logging.ERROR,
                    "heartbeat_failed",
                    worker=self.worker_id,
                    error=repr(error),
                    retry_in_s=wait,
                )
                logging.getLogger("django_watchdog.worker").exception("heartbeat failed")
            self._beat_now.wait(wait)
            self._beat_now.clear()
        self.store.release_connection()

    def recover(self) -> None:
        """Reconcile claims whose worker disappeared (SPEC §4.8).

        This host's workers are judged by their processes (engine/liveness.py); every other
        by its heartbeat on the database's clock, and only while the recovery gate is open
        (engine/gate.py): after an outage, live workers' heartbeats are old too.
        """
        timeout = self.options.timing("worker_timeout")
        local = liveness.judge_local(self.store.workers_on_host(liveness.this_host()))
        since = self.gate.open_since()
        found: list[tuple[str, str]] | None = None
        if since is not None:
            found = self.store.disappeared_claims(
                timeout=timeout,
                dead_workers=local.dead,
                alive_workers=(*local.alive, self.worker_id),
            )
            if not self.gate.still_open(since):
                found = None  # the database failed us while we read: trust no silence
        self._log_judging(found is not None)
        if found is None:
            found = self.store.claims_of(local.dead)
        deferred = set()
        for result in self.store.reconcile_all(found):
            if result.status == "deferred" and result.job_id is not None:
                deferred.add(result.job_id)
                self._log_deferred("recover", result.job_id)
            job = result.job
            if job is None:
                continue
            events.log(
                logging.WARNING,
                "recover",
                **events.job(job),
                status=result.status,
                outcome=job.outcome,
                reason=job.failure_reason,
                recovery_count=job.recovery_count,
            )
        self._deferred -= {
            (step, j) for step, j in self._deferred if step == "recover" and j not in deferred
        }
        if since is not None and self.gate.still_open(since):
            self.store.reap(timeout=timeout)
        interval = max(self.options.timing("heartbeat_interval"), timeout / 3)
        self._next_recovery = self.clock.monotonic() + interval

    def _log_judging(self, judging: bool) -> None:
        """Log when recovery by heartbeats stops (a database failure) and starts again."""
        if judging == self._judging:
            return
        self._judging = judging
        events.log(
            logging.INFO,
            "recovery_by_heartbeat",
            worker=self.worker_id,
            state="on" if judging else "off",
            why=(
                "own heartbeats healthy for WORKER_TIMEOUT"
                if judging
                else "database failure or late own heartbeat; only dead local pids recovered"
            ),
        )

    def report_unserved_lanes(self) -> list[str]:
        """Log, once per lane, queued work in lanes this worker has no handler for."""
        unserved = [
            lane
            for lane in self.store.lanes_without_handler(self.lanes)
            if lane not in self.options.exclude_lanes
            and (not self.options.lanes or lane in self.options.lanes)
        ]
        for lane in unserved:
            if lane not in self._warned_lanes:
                self._warned_lanes.add(lane)
                events.log(
                    logging.WARNING, "lane_without_handler", lane=lane, worker=self.worker_id
                )
        return unserved

    def _claim_lost(self, token: str) -> None:
        """A claim under ``token`` failed: it may have committed unseen. Its jobs (never
        started) are released by the main loop's next step, which this wakes."""
        with self._running_lock:
            self._lost_claims.add(token)
        self.wake.set()

    def _release_lost_claims(self) -> None:
        """Put back the jobs of claims that committed while their connection failed.

        A claim's tokens are its prefix plus the job's rank, and a prefix is used by one
        claim only; the worker never learnt of a failed claim's jobs, so none of them
        started, and no other claim (of a job running or about to run) shares the prefix.
        So this needs no pause in claiming, however busy the worker is.
        """
        with self._running_lock:
            tokens = sorted(self._lost_claims)
        released, deferred = self.store.release_lost_claims(self.worker_id, tokens)
        with self._running_lock:
            self._lost_claims.difference_update(tokens)
            self._lost_claims.update(token for _, token in deferred)  # queue busy: next step
        for job_id, _ in deferred:
            self._log_deferred("release_orphan", job_id)
        for job_id in released:
            events.log(
                logging.WARNING,
                "claim_released",
                job_id=job_id,
                worker=self.worker_id,
                why="claim committed while the connection failed; handler never ran",
            )

    # -- faults --------------------------------------------------------------------------

    def _log_deferred(self, step: str, job_id: str) -> None:
        """Log once that ``step`` for ``job_id`` waits for a lock another transaction holds
        (a stalled or cut-off worker, until its server ends its transaction)."""
        if (step, job_id) in self._deferred:
            return
        self._deferred.add((step, job_id))
        events.log(
            logging.WARNING,
            f"{step}_deferred",
            job_id=job_id,
            worker=self.worker_id,
            why="its queue is locked by another transaction; retrying on a later pass",
        )

    def _retrying(self, step: Callable[[], Any]) -> Any:
        """Run ``step``; on an error log it, back off (reconnecting), and return 0.

        Database errors are expected (restarts, network cuts); anything else is a bug
        somewhere, logged with its traceback, but the worker keeps serving other jobs.
        """
        name = getattr(step, "__name__", "step")
        try:
            done = step()
        except DatabaseError as error:
            self.gate.failed()
            delay = self._backoff.failed()
            events.log(
                logging.WARNING,
                "store_unavailable",
                worker=self.worker_id,
                step=name,
                error=repr(error),
                retry_in_s=delay,
            )
            self.store.release_connection()
        except Exception as error:  # noqa: BLE001 - log and back off; never crash-loop
            delay = self._backoff.failed()
            events.log(
                logging.ERROR,
                "step_failed",
                worker=self.worker_id,
                step=name,
                error=repr(error),
                retry_in_s=delay,
            )
            logging.getLogger("django_watchdog.worker").exception("worker step %s failed", name)
        else:
            self.gate.succeeded()
            return done
        self._stopping.wait(delay)
        return 0
