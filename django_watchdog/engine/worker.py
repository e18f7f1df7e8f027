"""The worker engine: claim ready jobs, run their handlers in threads, settle with the token.

Threads, not processes: a handler mostly waits on I/O, each thread keeps its own database
connection, and a claim or settle is one short transaction. Run more worker processes (on
one machine or many) for CPU-bound handlers or more throughput.

Threads of one worker: the caller's (claims, recovery, shutdown), one heartbeat thread
(liveness and cancellation intents), one waker thread (NOTIFY or SQLite commit polling),
and ``concurrency`` job threads.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError

from ..conf import setting
from ..domain import decisions
from ..domain.errors import WatchdogError
from ..domain.values import Decision, SettleResult
from ..store.worker_store import WorkerStore
from . import events, liveness
from .clock import Clock, SystemClock
from .running import RunningJob
from .wakeup import Waker, make_waker

Handler = Callable[[RunningJob], Any]

BACKOFF_START = 0.1
BACKOFF_MAX = 5.0


def default_worker_id() -> str:
    return f"{socket.gethostname()[:40]}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass(frozen=True, kw_only=True)
class WorkerOptions:
    """How one worker process runs; ``None`` timings come from the ``WATCHDOG`` setting."""

    lanes: tuple[str, ...] = ()
    exclude_lanes: tuple[str, ...] = ()
    concurrency: int = 1
    burst: bool = False
    worker_id: str = field(default_factory=default_worker_id)
    poll_interval: float | None = None
    heartbeat_interval: float | None = None
    worker_timeout: float | None = None
    shutdown_grace: float | None = None

    def timing(self, name: str) -> float:
        value = getattr(self, name)
        return float(setting(name.upper()) if value is None else value)


class Backoff:
    """Doubling waits after consecutive database failures, reset by a success."""

    def __init__(self) -> None:
        self.delay = 0.0

    def failed(self) -> float:
        self.delay = min(BACKOFF_MAX, self.delay * 2 if self.delay else BACKOFF_START)
        return self.delay

    def succeeded(self) -> None:
        self.delay = 0.0


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
        self.wake = threading.Event()
        self._stopping = threading.Event()
        self._running: dict[str, tuple[RunningJob, Future[None]]] = {}
        self._running_lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._waker: Waker | None = None
        self._heart: threading.Thread | None = None
        self._next_recovery = 0.0
        self._warned_lanes: set[str] = set()
        self._backoff = Backoff()
        self.exhausted = False  # the last claim found no ready job
        self._claim_failed = False  # a claim's commit may have succeeded unseen
        self.abandoned: list[str] = []

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, *, threads: bool = True) -> None:
        """Register, recover what disappeared, and start the helper threads."""
        self._retrying(self._register)
        self._retrying(self.recover)
        self._retrying(self.report_unserved_lanes)
        if threads:
            self._executor = ThreadPoolExecutor(
                max_workers=self.options.concurrency, thread_name_prefix="watchdog-job"
            )
            self._heart = threading.Thread(
                target=self._heartbeat_loop, name="watchdog-heartbeat", daemon=True
            )
            self._heart.start()
            self._waker = make_waker(self.using, self.wake)
            if self._waker is not None:
                self._waker.start()

    def run(self) -> int:
        """Serve until ``stop()`` (or, with ``burst``, until no ready work remains); exit code."""
        self.start()
        try:
            while not self._stopping.is_set():
                started = self._retrying(self.run_once)
                if self._stopping.is_set():
                    break
                if self.options.burst and self.exhausted and not self.running_count():
                    events.log(logging.INFO, "burst_done", worker=self.worker_id)
                    break
                if started and not self.exhausted and self.free_slots():
                    continue  # ready work remains: claim again without sleeping
                self.wake.wait(timeout=self.options.timing("poll_interval"))
                self.wake.clear()
        finally:
            self.shutdown()
        return 0

    def stop(self) -> None:
        """Stop claiming; running jobs finish within the shutdown grace (signal-safe)."""
        self._stopping.set()
        self.wake.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def shutdown(self) -> None:
        """Wait for running jobs up to the grace period, then deregister."""
        self._stopping.set()
        grace = self.options.timing("shutdown_grace")
        deadline = self.clock.monotonic() + grace
        while self.running_count() and self.clock.monotonic() < deadline:
            self.wake.wait(timeout=min(0.1, max(0.0, deadline - self.clock.monotonic())))
            self.wake.clear()
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
        if self._waker is not None:
            self._waker.stop()
        try:
            self.store.deregister(self.worker_id)
        except DatabaseError as error:
            events.log(
                logging.WARNING, "deregister_failed", worker=self.worker_id, error=repr(error)
            )
        if self._executor is not None:
            self._executor.shutdown(wait=not self.abandoned, cancel_futures=True)
        events.log(logging.INFO, "worker_stopped", worker=self.worker_id)

    # -- one step ----------------------------------------------------------------------

    def run_once(self) -> int:
        """Recover if due, then claim into every free slot; return how many jobs started.

        Without job threads (``start(threads=False)``) each claimed job runs to settlement
        here, one at a time: the step-by-step mode tests use.
        """
        if self.clock.monotonic() >= self._next_recovery:
            self.recover()
        if self._claim_failed:
            self._release_orphans()
        started = 0
        self.exhausted = False
        while self.free_slots() and not self._stopping.is_set():
            try:
                result = self.store.claim(
                    lanes=self.lanes, exclude_lanes=(), worker_id=self.worker_id
                )
            except DatabaseError:
                self._claim_failed = True
                raise
            except WatchdogError as error:
                events.log(
                    logging.ERROR,
                    "claim_skipped",
                    job_id=error.job_id,
                    kind=error.kind,
                    error=str(error),
                )
                continue
            if result.status == "none" or result.job is None:
                self.exhausted = True
                break
            job = result.job
            if result.status == "cancelled":
                events.log(
                    logging.INFO,
                    "settle",
                    job_id=job.job_id,
                    queue=job.queue,
                    lane=job.lane,
                    outcome="cancelled",
                    ran=False,
                )
                started += 1
                continue
            assert result.claim_token is not None
            running = RunningJob(job, claim_token=result.claim_token, worker_id=self.worker_id)
            events.log(
                logging.DEBUG,
                "claim",
                job_id=job.job_id,
                queue=job.queue,
                lane=job.lane,
                priority=job.priority,
                recovery_count=job.recovery_count,
            )
            started += 1
            self._dispatch(running)
        self._backoff.succeeded()
        return started

    def _release_orphans(self) -> None:
        with self._running_lock:
            known = list(self._running)
        for job_id in self.store.release_orphans(self.worker_id, known):
            events.log(
                logging.WARNING,
                "claim_released",
                job_id=job_id,
                worker=self.worker_id,
                why="claim committed while the connection failed; handler never ran",
            )
        self._claim_failed = False

    def free_slots(self) -> int:
        return max(0, self.options.concurrency - self.running_count())

    def running_count(self) -> int:
        with self._running_lock:
            return len(self._running)

    def running_jobs(self) -> list[RunningJob]:
        with self._running_lock:
            return [running for running, _ in self._running.values()]

    # -- execution ---------------------------------------------------------------------

    def _dispatch(self, running: RunningJob) -> None:
        if self._executor is None:
            self._execute(running)
            return
        future: Future[None] = Future()
        with self._running_lock:
            self._running[running.job_id] = (running, future)
        self._executor.submit(self._execute_tracked, running, future)

    def _execute_tracked(self, running: RunningJob, future: Future[None]) -> None:
        try:
            self._execute(running)
        finally:
            with self._running_lock:
                self._running.pop(running.job_id, None)
            future.set_result(None)
            self.wake.set()

    def _execute(self, running: RunningJob) -> None:
        """Run the lane's handler and settle its decision; never raises."""
        started = self.clock.monotonic()
        handler = self.handlers[running.lane]
        warning = None
        try:
            value = handler(running)
        except BaseException as error:  # noqa: BLE001 - every failure is the job's outcome
            decision = decisions.from_exception(error)
            if decision.traceback:
                events.log(
                    logging.WARNING,
                    "handler_raised",
                    job_id=running.job_id,
                    queue=running.queue,
                    lane=running.lane,
                    reason=decision.failure_reason or type(error).__name__,
                )
                logging.getLogger("django_watchdog.handler").warning(
                    "job %s raised:\n%s", running.job_id, decision.traceback
                )
        else:
            decision, warning = decisions.from_return(value)
        if warning:
            events.log(logging.WARNING, "result_dropped", job_id=running.job_id, detail=warning)
        settled = self._settle(running, decision)
        duration = self.clock.monotonic() - started
        if settled.status in ("settled", "replayed") and settled.job is not None:
            outcome = settled.job.outcome
            level = logging.INFO if outcome in ("failed", "interrupted") else logging.DEBUG
            events.log(
                level,
                "settle",
                job_id=running.job_id,
                queue=running.queue,
                lane=running.lane,
                outcome=outcome,
                reason=settled.job.failure_reason,
                duration_s=duration,
            )
        else:
            events.log(
                logging.WARNING,
                "settle_conflict",
                job_id=running.job_id,
                queue=running.queue,
                lane=running.lane,
                status=settled.status,
                decided=decision.outcome.value,
                duration_s=duration,
            )

    def _settle(self, running: RunningJob, decision: Decision) -> SettleResult:
        """Settle with the claim token, retrying through database outages (it is idempotent)."""
        backoff = Backoff()
        while True:
            try:
                return self.store.settle(running.job_id, running.claim_token, decision)
            except DatabaseError as error:
                delay = backoff.failed()
                events.log(
                    logging.WARNING,
                    "store_unavailable",
                    action="settle",
                    job_id=running.job_id,
                    error=repr(error),
                    retry_in_s=delay,
                )
                self.store.release_connection()
                threading.Event().wait(delay)

    # -- liveness and recovery -----------------------------------------------------------

    def _register(self) -> None:
        self.store.register(
            self.worker_id,
            now=self.clock.now(),
            lanes=self.lanes,
            exclude_lanes=self.options.exclude_lanes,
            concurrency=self.options.concurrency,
        )

    def beat(self) -> None:
        """Heartbeat (re-registering if reaped) and refresh running jobs' cancellation flags."""
        if not self.store.heartbeat(self.worker_id, now=self.clock.now()):
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
                        job_id=job.job_id,
                        queue=job.queue,
                        lane=job.lane,
                    )
                    job.request_cancel()

    def _heartbeat_loop(self) -> None:
        interval = self.options.timing("heartbeat_interval")
        backoff = Backoff()
        stopped = threading.Event()
        while not self._stopping.is_set():
            try:
                self.beat()
                backoff.succeeded()
                wait = interval
            except DatabaseError as error:
                wait = backoff.failed()
                events.log(
                    logging.WARNING,
                    "liveness_unavailable",
                    worker=self.worker_id,
                    error=repr(error),
                    retry_in_s=wait,
                )
                self.store.release_connection()
            stopped.wait(wait)
        self.store.release_connection()

    def recover(self) -> None:
        """Reconcile claims whose worker disappeared (SPEC §4.8); report lanes nobody serves."""
        timeout = self.options.timing("worker_timeout")
        now = self.clock.now()
        dead = liveness.dead_local_workers(
            self.store.workers_on_host(liveness.this_host()), own_pid=os.getpid()
        )
        for result in self.store.recover(
            now=now, timeout=timeout, dead_workers=dead, alive=self.worker_id
        ):
            job = result.job
            if job is None:
                continue
            events.log(
                logging.WARNING,
                "recover",
                job_id=job.job_id,
                queue=job.queue,
                lane=job.lane,
                status=result.status,
                outcome=job.outcome,
                reason=job.failure_reason,
                recovery_count=job.recovery_count,
            )
        self.store.reap(now=now, timeout=timeout)
        interval = max(
            self.options.timing("heartbeat_interval"), self.options.timing("worker_timeout") / 3
        )
        self._next_recovery = self.clock.monotonic() + interval

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

    # -- faults --------------------------------------------------------------------------

    def _retrying(self, step: Callable[[], Any]) -> Any:
        """Run ``step``; on a database error log, reconnect after a backoff, and return 0."""
        try:
            return step()
        except DatabaseError as error:
            delay = self._backoff.failed()
            events.log(
                logging.WARNING,
                "store_unavailable",
                worker=self.worker_id,
                step=getattr(step, "__name__", "step"),
                error=repr(error),
                retry_in_s=delay,
            )
            self.store.release_connection()
            self._stopping.wait(delay)
            return 0
