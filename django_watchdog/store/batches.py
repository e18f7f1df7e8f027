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


#: What settling writes to each running job ``j`` from its ``i`` (decision) row; a recorded
#: cancellation wins over the handler's outcome.
SETTLE_SET = """
        state = 'settled',
        outcome = CASE WHEN j.cancellation_id IS NULL THEN i.outcome ELSE 'cancelled' END,
        failure_reason = CASE WHEN j.cancellation_id IS NULL THEN i.reason END,
        result = i.result,
        traceback = i.traceback,
        settled_at = <NOW>
"""
LOCK_QUEUES_OF_JOBS = """
SELECT q.name FROM watchdog_queue q
 WHERE q.name IN (SELECT j.queue FROM watchdog_job j WHERE j.job_id = ANY(%s::text[]))
 ORDER BY q.name
   FOR UPDATE OF q
"""
SETTLE_MANY_POSTGRES = f"""
WITH input AS (
    SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::jsonb[], %s::text[])
        AS i(job_id, token, outcome, reason, result, traceback)
),
settled AS (
    UPDATE watchdog_job AS j SET {SETTLE_SET}
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

#: SQLite (one writer: every read is current, nothing to lock).
SETTLE_MANY_SQLITE = f"""
WITH i(job_id, token, outcome, reason, result, traceback) AS (VALUES {{rows}})
UPDATE watchdog_job AS j SET {SETTLE_SET}
  FROM i
 WHERE j.job_id = i.job_id AND j.state = 'running' AND j.claim_token = i.token
RETURNING <COLUMNS>
"""
#: The next head of each given queue becomes ready, unless a job of the queue still runs:
#: its job waiting to retry, else its best queued job (heads.HEAD without the running rank).
READY_NEXT_HEADS_SQLITE = f"""
UPDATE watchdog_job SET ready = TRUE
 WHERE ready = <FALSE> AND id IN (
    SELECT {heads.NEXT_HEAD.format(queue="q.name")}
      FROM watchdog_queue q
     WHERE q.name IN ({{rows}})
       AND NOT EXISTS (SELECT 1 FROM watchdog_job x
                        WHERE x.queue = q.name AND x.state = 'running'))
"""


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
        quiet = claim_next.lanes if claim_next is not None and limit else ()
        settled = settle_many(using, settlements, quiet_lanes=quiet)
        for job_id, token in release:
            claims.release_in_transaction(using, job_id, token)
        claimed = claim_many(using, claim_next, limit, worker_id, token) if claim_next else []
    return settled, claimed


def settle_many(
    using: str, settlements: Sequence[Settlement], *, quiet_lanes: Sequence[str] = ()
) -> list[SettleResult]:
    """Settle each job for the holder of its claim token, inside the caller's transaction."""
    if not settlements:
        return []
    if vendor.is_postgres(using):
        vendor.bound_lock_waits(using)
        vendor.fetch(using, LOCK_QUEUES_OF_JOBS, ([s.job_id for s in settlements],))
    if heads.listening() or any(s.decision.retry_at is not None for s in settlements):
        return [
            claims.settle_in_transaction(
                using, s.job_id, s.claim_token, s.decision, quiet_lanes=quiet_lanes
            )
            for s in settlements
        ]
    values = [_settle_values(using, s) for s in settlements]
    if vendor.is_postgres(using):
        from ..conf import setting

        by_column = [list(column) for column in zip(*values, strict=True)]
        params = (*by_column, by_column[0], list(quiet_lanes), setting("NOTIFY_CHANNEL"))
        found = vendor.fetch(using, SETTLE_MANY_POSTGRES, params)
    else:
        found = vendor.fetch_rows(using, SETTLE_MANY_SQLITE, "(%s, %s, %s, %s, %s, %s)", values)
        queues = sorted({row[rows.column_index("queue")] for row in found})
        vendor.fetch_rows(using, READY_NEXT_HEADS_SQLITE, "%s", [(q,) for q in queues])
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
        vendor.param_json(using, decision.result),
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
