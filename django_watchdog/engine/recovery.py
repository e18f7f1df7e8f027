"""Recovery from the main loop: other workers' disappeared claims (SPEC §4.8), and this
worker's own claims that committed while their connection failed.

This host's workers are judged by their processes (engine/liveness.py); every other by its
heartbeat on the database's clock, and only while the recovery gate is open
(engine/gate.py): after an outage, live workers' heartbeats are old too.
"""

from __future__ import annotations

import logging

from . import events, liveness
from .clock import Clock
from .gate import RecoveryGate
from .holdings import Holdings
from .options import WorkerOptions
from .ports import EngineStore


class Recovery:
    """Reconciles disappeared claims and releases lost ones. Main thread only."""

    def __init__(
        self,
        store: EngineStore,
        *,
        options: WorkerOptions,
        gate: RecoveryGate,
        clock: Clock,
        holdings: Holdings,
        deferrals: events.Deferrals,
    ) -> None:
        self.store = store
        self.options = options
        self.worker_id = options.worker_id
        self.gate = gate
        self.clock = clock
        self.holdings = holdings
        self._deferrals = deferrals
        self._judging = False  # whether the last pass judged by heartbeats
        self._next = 0.0  # monotonic time of the next pass

    def due(self) -> bool:
        return self.clock.monotonic() >= self._next

    def recover(self) -> None:
        """Reconcile claims whose worker disappeared; the next pass is due a third of the
        worker timeout later (at least a heartbeat interval)."""
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
                self._deferrals.deferred("recover", result.job_id)
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
        self._deferrals.only("recover", deferred)
        if since is not None and self.gate.still_open(since):
            self.store.reap(timeout=timeout)
        interval = max(self.options.timing("heartbeat_interval"), timeout / 3)
        self._next = self.clock.monotonic() + interval

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

    def release_lost_claims(self) -> None:
        """Put back the jobs of claims that committed while their connection failed.

        A claim's tokens are its prefix plus the job's rank, and a prefix is used by one
        claim only; the worker never learnt of a failed claim's jobs, so none of them
        started, and no other claim (of a job running or about to run) shares the prefix.
        So this needs no pause in claiming, however busy the worker is.
        """
        tokens = self.holdings.lost_claims()
        released, deferred = self.store.release_lost_claims(self.worker_id, tokens)
        self.holdings.claims_released(tokens, (token for _, token in deferred))
        for job_id, _ in deferred:
            self._deferrals.deferred("release_orphan", job_id)
        for job_id in released:
            events.log(
                logging.WARNING,
                "claim_released",
                job_id=job_id,
                worker=self.worker_id,
                why="claim committed while the connection failed; handler never ran",
            )
