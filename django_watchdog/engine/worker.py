"""The worker engine: claim ready jobs, run their handlers in threads, settle with the token.

Threads, not processes: a handler mostly waits on I/O, each thread keeps its own database
connection, and a claim or settle is one short transaction. Run more worker processes (on
one machine or many) for CPU-bound handlers or more throughput.

Threads of one worker: the caller's (this module's main loop: claims, recovery, due jobs,
timeouts, shutdown), one heartbeat thread (engine/heartbeat.py), one waker thread (NOTIFY
or SQLite commit polling), and up to ``concurrency`` job threads (engine/threads.py),
which run jobs (engine/execution.py) or batches (engine/batch_execution.py) and settle
them (engine/settling.py). What they share is owned by one ``Holdings`` object.

The worker is given everything it reads: its store (``ports.EngineStore``), its handlers
and their lanes' options, its housekeeping and its clock.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from django.db import DatabaseError

from ..domain.errors import WatchdogError
from ..store.claims import Partition
from ..store.worker_store import WorkerStore
from . import events
from .batch_execution import BatchRunner
from .batches import Batch
from .claiming import Claimer
from .clock import Clock, SystemClock
from .deciding import Decider, Handler
from .execution import JobRunner
from .gate import RecoveryGate
from .heartbeat import Heart
from .holdings import Holdings
from .housekeeping import Housekeeping
from .options import WorkerOptions, default_worker_id
from .ports import EngineStore, LaneOptions
from .recovery import Recovery
from .running import RunningJob
from .settling import Settler
from .steps import Steps
from .threads import JobThreads
from .timeouts import Timeouts
from .wakeup import Waker, make_waker

__all__ = ["Handler", "WatchdogWorker", "WorkerOptions", "default_worker_id"]

logger = logging.getLogger("django_watchdog.worker")


class WatchdogWorker:
    """Drive with ``run()`` until stopped, or step by step with ``start()``/``run_once()``."""

    def __init__(
        self,
        options: WorkerOptions,
        *,
        handlers: Mapping[str, Handler],
        using: str = "default",
        clock: Clock | None = None,
        store: EngineStore | None = None,
        lane_options: Mapping[str, LaneOptions] | None = None,
        housekeeping: Housekeeping | None = None,
    ) -> None:
        """``handlers`` and ``lane_options`` map a lane to its handler and its defaults
        (retry, timeout); lanes the options do not serve are dropped. ``housekeeping``
        (schedules, retention, statistics) defaults to no schedules."""
        self.options = options
        self.worker_id = options.worker_id
        self.clock: Clock = clock or SystemClock()
        self.store: EngineStore = store or WorkerStore(using)
        self.using = using
        self.handlers = {lane: fn for lane, fn in handlers.items() if options.serves(lane)}
        self.lanes = tuple(sorted(self.handlers))
        self.partition = Partition(lanes=self.lanes)
        self.batch_size = options.batch_size()
        self.housekeeping = housekeeping or Housekeeping(
            WorkerStore(using), self.clock, schedules={}
        )
        self.wake = threading.Event()
        self._stopping = threading.Event()
        self.stop_requested = False  # set by a signal handler; see request_stop()
        self.exhausted = False  # the last claim found no ready job
        self.abandoned: list[str] = []
        self.holdings = Holdings()
        beat_now = threading.Event()
        timeout = options.timing("worker_timeout")
        # Another worker's heartbeat can also fall silent because the database was gone:
        # judge others only after our own heartbeats went through for a whole timeout.
        self.gate = RecoveryGate(
            self.clock, timeout=timeout, stall=timeout / 2, on_reconnect=beat_now.set
        )
        self.heart = Heart(
            self.store,
            options=options,
            lanes=self.lanes,
            gate=self.gate,
            clock=self.clock,
            holdings=self.holdings,
            stopping=self._stopping,
            beat_now=beat_now,
        )
        deferrals = events.Deferrals(self.worker_id)
        self.recovery = Recovery(
            self.store,
            options=options,
            gate=self.gate,
            clock=self.clock,
            holdings=self.holdings,
            deferrals=deferrals,
        )
        self.settler = Settler(
            self.store, worker_id=self.worker_id, gate=self.gate, lose_claim=self._claim_lost
        )
        decider = Decider(self.handlers, lane_options or {}, self.clock)
        self.claimer = Claimer(
            self.store,
            worker_id=self.worker_id,
            partition=self.partition,
            batch_size=self.batch_size,
            clock=self.clock,
            lane_timeout=decider.timeout,
            lose_claim=self._claim_lost,
        )
        self._job_threads = JobThreads(on_exit=self.store.release_connection)
        parts: dict[str, Any] = {
            "holdings": self.holdings,
            "claimer": self.claimer,
            "decider": decider,
            "settler": self.settler,
            "threads": self._job_threads,
            "clock": self.clock,
            "wake": self.wake,
            "wants_work": self._wants_work,
        }
        self.jobs = JobRunner(**parts)
        self.batches = BatchRunner(**parts)
        self.timeouts = Timeouts(
            holdings=self.holdings,
            settler=self.settler,
            clock=self.clock,
            options=options,
            flush=lambda batch: self.batches.flush(batch, claim=False),
            deferrals=deferrals,
        )
        self._waker: Waker | None = None
        self._warned_lanes: set[str] = set()
        self._steps = Steps(
            self.store, worker_id=self.worker_id, gate=self.gate, stopping=self._stopping
        )
        #: Run a main-loop step through errors (engine/steps.py).
        self._retrying = self._steps.run
        self._promote_at = 0.0  # monotonic time of the next look for due delayed jobs
        #: The idle wait just found no delayed job or retry waiting: the next step need not
        #: look again (a delayed job enqueued since is due later, and the next idle wait's
        #: look sees it). One statement per idle poll instead of two.
        self._nothing_delayed = False
        #: The idle wait's last look found nothing delayed or retrying, and nothing woke the
        #: worker since: with a waker, whatever enqueues a delayed job wakes it, so the next
        #: idle wait need not look again (a retry another worker made is claimed when due
        #: all the same: the claim reads ``retry_at``). An idle poll is then one statement.
        self._nothing_due_seen = False
        #: Whether a waker tells this worker of changes (``start()``): without one it looks.
        self._wakes_on_changes = False

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, *, threads: bool = True) -> None:
        """Register, recover what disappeared, and start the helper threads."""
        self._retrying(self.heart.register)
        self._retrying(self.recover)
        self._retrying(self.report_unserved_lanes)
        self.jobs.threaded = self.batches.threaded = threads
        events.log(
            logging.INFO,
            "worker_started",
            worker=self.worker_id,
            lanes=",".join(self.lanes),
            excluded=",".join(self.options.exclude_lanes) or None,
            concurrency=self.options.concurrency,
            batch=self.batch_size,
            burst=self.options.burst or None,
        )
        if threads:
            self.heart.start()
            self._waker = make_waker(
                self.using,
                self.wake,
                lambda: self.free_slots() > 0,
                probe=lambda: self.store.ready_probe(self.partition),
            )
            if self._waker is not None:
                self._waker.start()
                self._wakes_on_changes = self._waker.TELLS_EVERY_CHANGE

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
                if self.options.burst and self._burst_done():
                    events.log(logging.INFO, "burst_done", worker=self.worker_id)
                    break
                if started and not self.exhausted and self.free_slots():
                    continue  # ready work remains: claim again without sleeping
                self._sleep()
        finally:
            self.shutdown()
        return 0

    def _burst_done(self) -> bool:
        return (
            self.exhausted
            and not self.running_count()
            and not self.store.retries_pending(self.partition)
        )

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
        if self.holdings.batches():
            self._retrying(self.batches.flush_all)
        if self.holdings.lost_claims():  # else they would wait for recovery, spending its budget
            self._retrying(self.recovery.release_lost_claims)
        self.abandoned = self.holdings.running_ids()
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
        self.heart.stop()
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
        if self.recovery.due():
            self.recover()
        self.housekeeping.run_due()  # never raises: a failing step is backed off on its own
        if self.holdings.lost_claims():
            self.recovery.release_lost_claims()
        self.enforce_timeouts()
        started = self._claim_into_free_slots()
        nothing_delayed, self._nothing_delayed = self._nothing_delayed, False
        if not nothing_delayed and self.clock.monotonic() >= self._promote_at:
            # Delayed jobs enter their queues at most a poll interval late, or on time
            # when the idle loop knew when the next one was due. After the claims, so a
            # woken worker's first round trip is its claim; what this readies is claimed
            # at once.
            promoted = self.store.promote_due(now=self.clock.now())
            self._promote_at = self.clock.monotonic() + self.options.timing("poll_interval")
            if promoted and self.free_slots():
                started += self._claim_into_free_slots()
        self._steps.backoff.succeeded()
        return started

    def _claim_into_free_slots(self) -> int:
        """Claim ready jobs until every slot is busy or none is ready; how many started."""
        started = 0
        self.exhausted = False
        while self.free_slots() and self._wants_work():
            if self.batch_size > 1:
                jobs = self.claimer.claim_batch()
                if not jobs:
                    self.exhausted = True
                    break
                started += len(jobs)
                accepted = self.claimer.accept_all(jobs)
                if accepted:
                    self.batches.dispatch(Batch(accepted))
                continue
            try:
                result = self.claimer.claim()
            except WatchdogError as error:
                events.claim_skipped(error)
                continue
            running = self.claimer.accept(result)
            if running is None and result.status == "none":
                self.exhausted = True
                break
            started += 1
            if running is not None:
                self.jobs.dispatch(running)
        return started

    def free_slots(self) -> int:
        if self.batch_size > 1:
            busy = self.holdings.busy_batches()
        else:
            busy = self.holdings.running_count()
        return max(0, self.options.concurrency - busy)

    def running_count(self) -> int:
        return self.holdings.running_count()

    def running_jobs(self) -> list[RunningJob]:
        return self.holdings.running_jobs()

    def enforce_timeouts(self) -> None:
        """Flag runs past their deadline; give up on those past the grace (engine/timeouts.py)."""
        self.timeouts.enforce()

    def _idle_wait(self) -> float:
        """How long an idle main loop may sleep: the poll interval, or until something is due."""
        wait = self.options.timing("poll_interval")
        deadline = self.timeouts.next_deadline()
        if deadline is not None:
            wait = min(wait, max(0.0, deadline - self.clock.monotonic()))
        self._nothing_delayed = False
        if self.exhausted and self._nothing_due_seen and self._wakes_on_changes:
            self._nothing_delayed = True  # still nothing: see _nothing_due_seen
        elif self.exhausted:
            try:
                due = self.store.next_due()
            except DatabaseError:
                self.gate.failed()
                due = None
            else:
                self._nothing_delayed = self._nothing_due_seen = due is None
            if due is not None:
                until_due = max(0.0, (due - self.clock.now()).total_seconds())
                wait = min(wait, until_due)
                self._promote_at = min(self._promote_at, self.clock.monotonic() + until_due)
        return wait

    def _sleep(self) -> None:
        """The idle wait: until woken, or until the poll or something due. A wake that
        comes after the wait timed out stays set for the next one: cleared, it would be
        lost, and with a waker that tells every change the worker would not look again for
        the due time it told of."""
        woken = self.wake.wait(timeout=self._idle_wait())
        if woken:
            self.wake.clear()
        self._waited(woken=woken)

    def _waited(self, *, woken: bool) -> None:
        """The idle wait ended, ``woken`` by the event (a waker, a freed slot) or not."""
        if woken:
            self._nothing_due_seen = False

    # -- liveness, recovery and lanes ---------------------------------------------------

    def beat(self) -> None:
        """Heartbeat (re-registering if reaped) and refresh running jobs' cancellation flags."""
        self.heart.beat()

    def heartbeat_period(self) -> float:
        return self.heart.period()

    def recover(self) -> None:
        """Reconcile claims whose worker disappeared (SPEC §4.8; engine/recovery.py)."""
        self.recovery.recover()

    def report_unserved_lanes(self) -> list[str]:
        """Log, once per lane, queued work in lanes this worker has no handler for."""
        unserved = [
            lane
            for lane in self.store.lanes_without_handler(self.lanes)
            if self.options.serves(lane)
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
        self.holdings.lose_claim(token)
        self.wake.set()
