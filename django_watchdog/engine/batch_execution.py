"""Batch execution (``--batch N``): a job thread works through a batch (engine/batches.py)
and writes its results together with its next claim, in one transaction.

One bad member never holds the others back: a batch the database refuses is written job by
job, and a batch whose thread is stuck in an abandoned handler is flushed by the main loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..domain.errors import WatchdogError
from ..domain.states import Outcome
from ..domain.values import ClaimResult, Decision, SettleResult
from ..store.batches import Settlement
from . import events
from .batches import Batch, Decided
from .execution import Runner
from .settling import announce_settle, worker_error_decision

BatchWritten = tuple[list[SettleResult], list[ClaimResult | WatchdogError]]

logger = logging.getLogger("django_watchdog.worker")


class BatchRunner(Runner):
    """Runs batches in job threads and writes them; ``flush`` is also the main loop's."""

    def dispatch(self, batch: Batch) -> None:
        """Hand ``batch`` to a job thread (or work through it here, without threads)."""
        self.holdings.add_batch(batch)
        if not self.threaded:
            self._run_batches(batch)
            return
        self.threads.submit(self._batch_thread, batch)

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
                claim = self.threaded and self.wants_work() and not current.stuck
                following = self.flush(current, claim=claim)
            except Exception as error:  # noqa: BLE001 - the batch must still be written
                events.log(
                    logging.ERROR,
                    "batch_failed",
                    worker=self.settler.worker_id,
                    error=repr(error),
                )
                logger.exception("batch failed")
                self.flush(current, claim=False)
            finally:
                self.holdings.replace_batch(current, following)
            current = following
            self.wake.set()

    def _work_through(self, batch: Batch) -> None:
        """Run the batch's jobs in order until it is empty, stuck, or the worker stops.

        A job whose cancellation arrived before it started settles ``cancelled`` unrun; a
        failure to retry is written at once (it must reach its queue's head).
        """
        while True:
            running = batch.start_next(stopping=not self.wants_work())
            if running is None:
                return
            started = self.clock.monotonic()
            if running.cancel_requested:
                decision: Decision | None = Decision(outcome=Outcome.CANCELLED)
            else:
                self.claimer.start_clock(running)
                try:
                    decision = self.decider.decide(running)
                except Exception as error:  # noqa: BLE001 - the job must still settle
                    decision = worker_error_decision(error)
            if decision is None:
                continue  # abandoned: already settled, and the batch flushed
            duration = self.clock.monotonic() - started
            if decision.retry_at is not None:
                settled, _ = self.settler.settle(running, decision, None)
                announce_settle(running, decision, settled, duration)
                self.holdings.untrack([running])
                continue
            batch.decide(Decided(running, decision, duration))

    def flush(self, batch: Batch, *, claim: bool) -> Batch | None:
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
            settled, claimed = self._write(decided, settlements, release, claim=claim)
            for done, result in zip(decided, settled, strict=True):
                announce_settle(done.running, done.decision, result, done.duration)
            for running in unstarted:
                events.log(logging.INFO, "claim_released", **events.job(running), why="unstarted")
            jobs = self.claimer.accept_all(claimed)
            if jobs:
                following = Batch(jobs)
        finally:
            self.holdings.batch_written([d.running for d in decided] + unstarted, following)
        return following

    def flush_all(self) -> None:
        """Release every batch's unstarted jobs and write its decisions (shutdown)."""
        for batch in self.holdings.batches():
            self.flush(batch, claim=False)

    def _write(
        self,
        decided: list[Decided],
        settlements: list[Settlement],
        release: list[tuple[str, str]],
        *,
        claim: bool,
    ) -> BatchWritten:
        """``store.settle_and_claim`` through outages and failing receivers.

        If the database refuses the batch (a value it cannot hold, a receiver that
        raises), each job is settled on its own (``Settler.settle``, which stores what it
        can), then the rest is written: one bad outcome never holds back the others.
        """
        store = self.settler.store
        claimer = self.claimer
        given_up: BatchWritten = ([SettleResult(status="conflict") for _ in settlements], [])

        def rest(settled: list[SettleResult]) -> Callable[[str | None], BatchWritten]:
            def write(token: str | None) -> BatchWritten:
                if not release and not claim:
                    return settled, []
                _, claimed = store.settle_and_claim(
                    [],
                    release=release,
                    claim_next=claimer.partition if claim else None,
                    limit=claimer.batch_size if claim else 0,
                    worker_id=claimer.worker_id,
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
            return rest([self.settler.settle(d.running, d.decision, None)[0] for d in decided])

        def together(token: str | None) -> BatchWritten:
            return store.settle_and_claim(
                settlements,
                release=release,
                claim_next=claimer.partition if claim else None,
                limit=claimer.batch_size if claim else 0,
                worker_id=claimer.worker_id,
                token=token,
            )

        return self.settler.write(
            together,
            claims=claim,
            given_up=given_up,
            instead=one_by_one,
            action="settle_batch",
            jobs=",".join(s.job_id for s in settlements),
        )
