"""Settle several jobs and claim several more in one transaction (a batching worker's step).

The rules are those of ``claims``: each settle is fenced by its claim token, each queue is
locked before it changes, a claim takes only ready heads (so a batch never holds two jobs of
one queue), and with ``queue_changed`` receivers every change is announced in this
transaction. What changes is the number of statements: with no receivers, one settles
every job (on PostgreSQL after one that locks every queue involved), one readies each
queue's next head (on PostgreSQL in the same statement), and one claims up to ``limit``
ready jobs, for one commit. With receivers, or a failure to retry, each job takes the
one-job code, inside the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from ..domain.errors import WatchdogError
from ..domain.states import Outcome
from ..domain.values import ClaimResult, Decision, SettleResult
from . import claims, deadlocks, heads, recovery, rows
from .claims import Partition
from .dialects import WAKE_EVERY_LANE, QuietLanes, dialect

#: Largest batch a worker may claim at once (``--batch``).
BATCH_MAX = 500


@dataclass(frozen=True, slots=True)
class Settlement:
    """One running job's decision, with the claim token that fences it."""

    job_id: str
    claim_token: str
    decision: Decision


@deadlocks.retried
def settle_and_claim(
    using: str,
    settlements: Sequence[Settlement],
    *,
    release: Sequence[tuple[str, str]] = (),
    claim_next: Partition | None = None,
    limit: int = 0,
    worker_id: str | None = None,
    token: str | None = None,
) -> tuple[list[SettleResult], list[ClaimResult | WatchdogError]]:
    """Settle ``settlements``, put back ``release`` (claimed, never started) and claim up to
    ``limit`` ready jobs of ``claim_next`` (under the token prefix ``token``), all in one
    transaction.

    Results come in the order of ``settlements``; a claimed row that did not decode comes
    back as the ``WatchdogError`` it raised, already settled ``failed``.
    """
    if not settlements and not release:
        with claims.claim_transaction(using):
            return [], claim_many(using, claim_next, limit, worker_id, token) if claim_next else []
    with transaction.atomic(using=using):
        quiet = claims.quiet_lanes(claim_next if limit else None)
        settled = settle_many(using, settlements, quiet=quiet)
        for job_id, token in release:
            recovery.release_in_transaction(using, job_id, token)
        claimed = claim_many(using, claim_next, limit, worker_id, token) if claim_next else []
    return settled, claimed


def settle_many(
    using: str, settlements: Sequence[Settlement], *, quiet: QuietLanes = WAKE_EVERY_LANE
) -> list[SettleResult]:
    """Settle each job for the holder of its claim token, inside the caller's transaction."""
    if not settlements:
        return []
    d = dialect(using)
    d.lock_queues_of_jobs([s.job_id for s in settlements])
    if heads.listening() or any(s.decision.retry_at is not None for s in settlements):
        return [
            claims.settle_in_transaction(using, s.job_id, s.claim_token, s.decision, quiet=quiet)
            for s in settlements
        ]
    found = d.settle_many([_settle_values(using, s) for s in settlements], quiet)
    settled = {
        job.job_id: job for job in (rows.to_job(using, row, as_stored=True) for row in found)
    }
    results = []
    for s in settlements:
        job = settled.get(s.job_id)
        if job is None or job.claim_token != s.claim_token:
            results.append(claims.unchanged(using, s.job_id, s.claim_token, s.decision))
        else:
            results.append(SettleResult(status="settled", job=job))
    return results


def _settle_values(using: str, s: Settlement) -> tuple[Any, ...]:
    """(job id, token, outcome, reason, result, traceback) of one settlement."""
    decision = s.decision
    reason = decision.failure_reason if decision.outcome == Outcome.FAILED else None
    if decision.outcome == Outcome.FAILED and not reason:
        reason = "Failed without a reason"
    return (
        s.job_id,
        s.claim_token,
        decision.outcome.value,
        reason,
        dialect(using).param_json(decision.result),
        decision.traceback,
    )


def claim_many(
    using: str, partition: Partition, limit: int, worker_id: str | None, token: str | None = None
) -> list[ClaimResult | WatchdogError]:
    """Claim up to ``limit`` ready jobs (settling cancelled ones), in the caller's transaction.

    Only ready jobs are claimed, and a queue has one ready job unless some of its jobs
    carry a cancellation (they settle ``cancelled`` here, never run): so every job handed
    out to run belongs to a different queue.
    """
    if limit <= 0:
        return []
    return claims.claim_ready(using, partition, limit, worker_id, token=token)
