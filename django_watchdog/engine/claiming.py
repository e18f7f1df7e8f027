"""Claims made from the main loop, and the runs a claim hands out.

A claim is one short transaction that marks jobs running under a fresh token prefix. If it
fails, it may still have committed unseen: its prefix is reported as lost, and the main
loop releases its jobs (``Recovery.release_lost_claims``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..domain.errors import WatchdogError
from ..domain.values import ClaimResult
from ..store.claims import Partition, new_claim_token
from . import events
from .clock import Clock
from .ports import EngineStore
from .running import RunningJob


class Claimer:
    """Claims for one worker and turns claim results into runs. Thread-safe."""

    def __init__(
        self,
        store: EngineStore,
        *,
        worker_id: str,
        partition: Partition,
        batch_size: int,
        clock: Clock,
        lane_timeout: Callable[[str], float | None],
        lose_claim: Callable[[str], None],
    ) -> None:
        self.store = store
        self.worker_id = worker_id
        self.partition = partition
        self.batch_size = batch_size
        self.clock = clock
        self._lane_timeout = lane_timeout
        self._lose_claim = lose_claim

    def claim(self) -> ClaimResult:
        """Claim one ready job (``status`` ``none`` when there is none)."""
        token = new_claim_token()
        try:
            return self.store.claim(self.partition, worker_id=self.worker_id, token=token)
        except WatchdogError:
            raise
        except BaseException:
            self._lose_claim(token)
            raise

    def claim_batch(self) -> list[ClaimResult | WatchdogError]:
        """Claim up to ``batch_size`` jobs in one transaction."""
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
            self._lose_claim(token)
            raise
        return claimed

    def accept_all(self, claimed: list[ClaimResult | WatchdogError]) -> list[RunningJob]:
        """The runs of a batch claim; rows that failed to decode are logged and skipped."""
        jobs = []
        for result in claimed:
            if isinstance(result, WatchdogError):
                events.claim_skipped(result)
                continue
            running = self.accept(result, start_clock=False)
            if running is not None:
                jobs.append(running)
        return jobs

    def accept(self, result: ClaimResult, *, start_clock: bool = True) -> RunningJob | None:
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
        running = RunningJob(
            job,
            claim_token=result.claim_token,
            worker_id=self.worker_id,
            settle_logs_traceback=True,
        )
        running.timeout = job.timeout or self._lane_timeout(job.lane)
        if start_clock:
            self.start_clock(running)
        events.log(
            logging.DEBUG,
            "claim",
            **events.job(job),
            priority=job.priority,
            attempt=job.attempts,
            recovery_count=job.recovery_count,
        )
        return running

    def start_clock(self, running: RunningJob) -> None:
        """The job starts now: its timeout (if any) counts from here."""
        if running.timeout is not None:
            running.deadline = self.clock.monotonic() + running.timeout
