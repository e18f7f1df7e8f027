"""Settling with the claim token, through outages and failing receivers, and when to give up.

A settle is idempotent (fenced by the claim token), so through a database outage it is
retried until the server is back. A claim made with it may have committed unseen: its
token prefix goes to the worker's lost claims, which the main loop releases. A write the
database refuses for its data is replaced once by a storable one; a ``queue_changed``
receiver that raises is retried ``SETTLE_REJECTIONS`` times, then given up: the job stays
running under this worker until it stops, and recovery (SPEC §4.8) resolves it then.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import DataError, InterfaceError, OperationalError

from ..domain import decisions
from ..domain.errors import WatchdogError
from ..domain.validation import REASON_MAX
from ..domain.values import ClaimResult, Decision, SettleResult
from ..store.claims import Partition, new_claim_token
from ..store.worker_store import LockBusy
from . import events, hooks
from .backoff import Backoff
from .gate import RecoveryGate
from .ports import EngineStore
from .running import RunningJob

Written = TypeVar("Written")
Settled = tuple[SettleResult, ClaimResult | WatchdogError | None]

#: Times a write refused by something other than the database's availability is tried.
SETTLE_REJECTIONS = 3
#: A write the database refused for its data: the outcome is replaced by a storable one.
UNSTORABLE = (DataError, UnicodeError, RecursionError, OverflowError)

logger = logging.getLogger("django_watchdog.worker")


def worker_error_decision(error: Exception) -> Decision:
    """A run whose outcome this worker failed to decide: ``failed``, saying why."""
    logger.exception("deciding an outcome failed")
    return Decision.failed(
        f"Worker error: {decisions.failure_reason(error)}"[:REASON_MAX],
        traceback=decisions.storable_text(decisions.formatted(error)),
    )


#: The level of a settle's log line, by the outcome stored (``retrying``: going back to
#: wait for a retry). A final failure is an ERROR, once per job, with its exception.
SETTLE_LEVELS = {
    "completed": logging.INFO,
    "cancelled": logging.INFO,
    "retrying": logging.WARNING,
    "outcome_unknown": logging.WARNING,
    "failed": logging.ERROR,
}


def announce_settle(
    running: RunningJob, decision: Decision, settled: SettleResult, duration: float
) -> None:
    """Log a settle (its outcome, or the conflict that fenced it out) and send
    ``job_finished``; after the settle's transaction, never inside it."""
    job = settled.job
    outcome: str | None = None
    if settled.status in ("settled", "replayed", "retrying") and job is not None:
        outcome = job.outcome or "retrying"
        events.log(
            SETTLE_LEVELS.get(outcome, logging.INFO),
            "settle",
            **events.job(running),
            outcome=outcome,
            reason=job.failure_reason,
            duration_s=duration,
            retry_at=job.retry_at.isoformat() if job.retry_at else None,
            worker=running.worker_id,
            exc_info=running.error if outcome in ("failed", "retrying") else None,
        )
    else:
        events.log(
            logging.WARNING,
            "settle_conflict",
            **events.job(running),
            status=settled.status,
            decided=decision.outcome.value,
            duration_s=duration,
            worker=running.worker_id,
        )
    hooks.finished(running, outcome, duration)


class Settler:
    """Writes settles (and the claims made with them) for one worker; thread-safe."""

    def __init__(
        self,
        store: EngineStore,
        *,
        worker_id: str,
        gate: RecoveryGate,
        lose_claim: Callable[[str], None],
        pause: Callable[[float], object] | None = None,
    ) -> None:
        """``pause(seconds)`` waits between attempts (tests pass one that records)."""
        self.store = store
        self.worker_id = worker_id
        self.gate = gate
        self._lose_claim = lose_claim
        self.pause = pause or threading.Event().wait

    def settle(
        self,
        running: RunningJob,
        decision: Decision,
        claim_next: Partition | None,
        *,
        defer_if_busy: bool = False,
    ) -> Settled:
        """Settle with the claim token (and claim the next job); with ``defer_if_busy``, a
        queue lock held elsewhere raises ``LockBusy`` instead of being waited out (the main
        loop must not wait on another worker). An outcome the database refuses as data (a
        NUL, a lone surrogate, anything the driver cannot encode) is replaced by a
        ``failed`` settle saying so."""
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

        return self.write(
            writing(decision),
            claims=claim_next is not None,
            given_up=given_up,
            defer_if_busy=defer_if_busy,
            instead=storable,
            action="settle",
            **events.job(running),
        )

    def write(
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
        ``None`` when it claims nothing). The first time the database refuses the write
        itself, ``instead`` may name another write to try (a storable outcome, a batch
        settled job by job). Returns ``given_up`` after ``SETTLE_REJECTIONS`` refusals.
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
                    self._lose_claim(token)
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
                    self._lose_claim(token)  # rolled back, unless it failed after the commit
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
                logger.exception("%s raised (a queue_changed receiver?)", about)
                if rejected >= SETTLE_REJECTIONS:
                    return given_up
                delay = backoff.failed()
            self.pause(delay)

    def release_unstarted(self, jobs: list[RunningJob]) -> None:
        """Put back jobs claimed for this worker that will not start (it is stopping)."""
        release = [(r.job_id, r.claim_token) for r in jobs]
        nothing: tuple[list[SettleResult], list[ClaimResult | WatchdogError]] = ([], [])
        self.write(
            lambda token: self.store.settle_and_claim([], release=release),
            claims=False,
            given_up=nothing,
            action="release",
            jobs=",".join(r.job_id for r in jobs),
        )
        for running in jobs:
            events.log(logging.INFO, "claim_released", **events.job(running), why="stopping")

    def settle_worker_error(self, running: RunningJob, error: Exception) -> None:
        """Something escaped a run: settle its job ``failed`` (a no-op if it settled)."""
        events.log(logging.ERROR, "run_failed", **events.job(running), error=repr(error))
        decision = worker_error_decision(error)
        try:
            settled, _ = self.settle(running, decision, None)
            announce_settle(running, decision, settled, 0.0)
        except Exception:  # noqa: BLE001 - recovery resolves it once this worker stops
            logger.exception("job %s could not be settled", running.job_id)
