"""Settle several jobs and claim several more in one transaction (a batching worker's step).

The rules are those of ``claims``: each settle is fenced by its claim token, each queue is
locked before it changes, a claim takes only ready heads (so a batch never holds two jobs of
one queue), and with ``queue_changed`` receivers every change is announced in this
transaction. What changes is the number of round trips: on PostgreSQL, with no receivers,
one statement locks every queue involved, one settles every job and readies each queue's
next head, and one claims up to ``limit`` ready jobs, for one commit. Everywhere else it is
the one-job code, run for each job inside the same transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from ..domain.errors import WatchdogError
from ..domain.states import Outcome
from ..domain.values import ClaimResult, Decision, SettleResult
from . import claims, heads, rows, vendor
from .claims import Partition

#: Largest batch a worker may claim at once (``--batch``).
BATCH_MAX = 500


@dataclass(frozen=True, slots=True)
class Settlement:
    """One running job's decision, with the claim token that fences it."""

    job_id: str
    claim_token: str
    decision: Decision


LOCK_QUEUES_OF_JOBS = """
SELECT q.name FROM watchdog_queue q
 WHERE q.name IN (SELECT j.queue FROM watchdog_job j WHERE j.job_id = ANY(%s::text[]))
 ORDER BY q.name
   FOR UPDATE OF q
"""
SETTLE_MANY_POSTGRES = """
WITH input AS (
    SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::jsonb[], %s::text[])
        AS i(job_id, token, outcome, reason, result, traceback)
),
settled AS (
    UPDATE watchdog_job AS j SET
        state = 'settled',
        outcome = CASE WHEN j.cancellation_id IS NULL THEN i.outcome ELSE 'cancelled' END,
        failure_reason = CASE WHEN j.cancellation_id IS NULL THEN i.reason END,
        result = i.result,
        traceback = i.traceback,
        settled_at = <NOW>
      FROM input i
     WHERE j.job_id = i.job_id AND j.state = 'running' AND j.claim_token = i.token
    RETURNING <j.COLUMNS>
),
head AS (
    SELECT h.* FROM (SELECT DISTINCT queue FROM settled) AS s
    CROSS JOIN LATERAL (
        SELECT * FROM (
            SELECT 0 AS rank, id FROM watchdog_job
             WHERE queue = s.queue AND state = 'running' AND job_id <> ALL(%s::text[])
            UNION ALL
            SELECT * FROM (
                SELECT 1 AS rank, id FROM watchdog_job
                 WHERE queue = s.queue AND state = 'queued' AND retry_at IS NOT NULL
                 LIMIT 1) AS retrying
            UNION ALL
            SELECT * FROM (
                SELECT 2 AS rank, id FROM watchdog_job
                 WHERE queue = s.queue AND state = 'queued' AND delayed = <FALSE>
                 ORDER BY priority DESC, position ASC
                 LIMIT 1) AS best
        ) AS candidates
        ORDER BY rank
        LIMIT 1
    ) AS h
),
marked AS (
    UPDATE watchdog_job SET ready = TRUE FROM head
     WHERE watchdog_job.id = head.id AND head.rank <> 0 AND NOT watchdog_job.ready
    RETURNING CASE WHEN watchdog_job.lane = ANY(%s::text[]) THEN NULL
                   ELSE pg_notify(%s, watchdog_job.lane) END
)
SELECT * FROM settled
"""


def settle_and_claim(
    using: str,
    settlements: Sequence[Settlement],
    *,
    release: Sequence[tuple[str, str]] = (),
    claim_next: Partition | None = None,
    limit: int = 0,
    worker_id: str | None = None,
) -> tuple[list[SettleResult], list[ClaimResult | WatchdogError]]:
    """Settle ``settlements``, put back ``release`` (claimed, never started) and claim up to
    ``limit`` ready jobs of ``claim_next``, all in one transaction.

    Results come in the order of ``settlements``; a claimed row that did not decode comes
    back as the ``WatchdogError`` it raised, already settled ``failed``.
    """
    if not settlements and not release:
        with claims.claim_transaction(using):
            return [], claim_many(using, claim_next, limit, worker_id) if claim_next else []
    with transaction.atomic(using=using):
        quiet = claim_next.lanes if claim_next is not None and limit else ()
        settled = settle_many(using, settlements, quiet_lanes=quiet)
        for job_id, token in release:
            claims.release_in_transaction(using, job_id, token)
        claimed = claim_many(using, claim_next, limit, worker_id) if claim_next else []
    return settled, claimed


def settle_many(
    using: str, settlements: Sequence[Settlement], *, quiet_lanes: Sequence[str] = ()
) -> list[SettleResult]:
    """Settle each job for the holder of its claim token, inside the caller's transaction."""
    if not settlements:
        return []
    job_ids = [s.job_id for s in settlements]
    if vendor.is_postgres(using):
        vendor.fetch(using, LOCK_QUEUES_OF_JOBS, (job_ids,))
        if not heads.listening() and all(s.decision.retry_at is None for s in settlements):
            return _settle_many_postgres(using, settlements, quiet_lanes)
    return [
        claims.settle_in_transaction(
            using, s.job_id, s.claim_token, s.decision, quiet_lanes=quiet_lanes
        )
        for s in settlements
    ]


def _settle_many_postgres(
    using: str, settlements: Sequence[Settlement], quiet_lanes: Sequence[str]
) -> list[SettleResult]:
    from ..conf import setting

    columns: list[list[Any]] = [[], [], [], [], [], []]
    for s in settlements:
        decision = s.decision
        reason = decision.failure_reason if decision.outcome == Outcome.FAILED else None
        if decision.outcome == Outcome.FAILED and not reason:
            reason = "Failed without a reason"
        values = (
            s.job_id,
            s.claim_token,
            decision.outcome.value,
            reason,
            vendor.param_json(using, decision.result),
            decision.traceback,
        )
        for column, value in zip(columns, values, strict=True):
            column.append(value)
    job_ids = columns[0]
    params = (*columns, job_ids, list(quiet_lanes), setting("NOTIFY_CHANNEL"))
    found = {}
    for row in vendor.fetch(using, SETTLE_MANY_POSTGRES, params):
        job = rows.to_job(using, row)
        found[job.job_id] = job
    results = []
    for s in settlements:
        settled = found.get(s.job_id)
        if settled is None or settled.claim_token != s.claim_token:
            results.append(claims.unchanged(using, s.job_id, s.claim_token, s.decision))
        else:
            results.append(SettleResult(status="settled", job=settled))
    return results


def claim_many(
    using: str, partition: Partition, limit: int, worker_id: str | None
) -> list[ClaimResult | WatchdogError]:
    """Claim up to ``limit`` ready jobs (settling cancelled ones), in the caller's transaction.

    Only ready jobs are claimed, and a queue has one ready job unless some of its jobs
    carry a cancellation (they settle ``cancelled`` here, never run): so every job handed
    out to run belongs to a different queue.
    """
    if limit <= 0:
        return []
    if vendor.is_postgres(using):
        return claims.claim_ready_postgres(using, partition, limit, worker_id)
    taken: list[ClaimResult | WatchdogError] = []
    while len(taken) < limit:
        result = claims.claim_in_transaction(using, partition, worker_id)
        if result is None:
            break
        taken.append(result)
    return taken
