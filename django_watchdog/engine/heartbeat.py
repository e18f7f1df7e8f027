"""This worker's liveness: its row in the Worker table, kept fresh by a heartbeat thread.

Each beat also refreshes running jobs' ``cancel_requested`` flags from the recorded
cancellation intents. Beats open the recovery gate (engine/gate.py); through an outage the
thread retries at least once a period, and at once when another thread got through.
"""

from __future__ import annotations

import logging
import threading

from django.db import DatabaseError

from . import events, liveness
from .backoff import Backoff
from .clock import Clock
from .gate import RecoveryGate
from .holdings import Holdings
from .options import WorkerOptions
from .ports import EngineStore

#: Longest a stopping worker waits for its heartbeat thread to close its connection.
HEARTBEAT_JOIN = 5.0

logger = logging.getLogger("django_watchdog.worker")


class Heart:
    """Registers the worker and beats for it, in its own thread once started."""

    def __init__(
        self,
        store: EngineStore,
        *,
        options: WorkerOptions,
        lanes: tuple[str, ...],
        gate: RecoveryGate,
        clock: Clock,
        holdings: Holdings,
        stopping: threading.Event,
        beat_now: threading.Event,
    ) -> None:
        self.store = store
        self.options = options
        self.worker_id = options.worker_id
        self.lanes = lanes
        self.gate = gate
        self.clock = clock
        self.holdings = holdings
        self._stopping = stopping
        #: Set to have the thread beat at once (and, when stopping, to end it).
        self.beat_now = beat_now
        self.thread: threading.Thread | None = None

    def register(self) -> None:
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
            self.register()
        running = self.holdings.running_jobs()
        if running:
            cancelled = self.store.cancellations(r.job_id for r in running)
            for job in running:
                if job.job_id in cancelled and not job.cancel_requested:
                    events.log(logging.INFO, "cancel_requested", **events.job(job))
                    job.request_cancel()

    def period(self) -> float:
        """Seconds between heartbeats: ``HEARTBEAT_INTERVAL``, at most a quarter of the
        timeout (the recovery gate's margin, engine/gate.py)."""
        return min(
            self.options.timing("heartbeat_interval"), self.options.timing("worker_timeout") / 4
        )

    def start(self) -> None:
        self.thread = threading.Thread(target=self.loop, name="watchdog-heartbeat", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """End the thread (the worker is stopping) and wait for it to close its connection:
        none is left open when the process exits (on PostgreSQL, a ResourceWarning and a
        server session)."""
        if self.thread is not None:
            self.beat_now.set()
            self.thread.join(timeout=HEARTBEAT_JOIN)

    def loop(self) -> None:
        """Beat every period; through an outage retry at least as often, and at once when
        the main loop got through, so the heartbeat never lags the rest of the worker."""
        period = self.period()
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
                logger.exception("heartbeat failed")
            self.beat_now.wait(wait)
            self.beat_now.clear()
        self.store.release_connection()
