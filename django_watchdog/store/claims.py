"""Claim, settle and reconcile: the running half of a job's life (SPEC §4.3–4.5, §4.8).

Every verb locks the job's queue first, then changes the job with a conditional update
on (job, state, claim token): zero rows is a reported conflict, never an overwrite.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import OperationalError, transaction
from django.db.models import F, Q
from django.db.models.functions import Now
from django.utils import timezone

from ..domain import states
from ..domain.errors import WatchdogError
from ..domain.states import Outcome, State
from ..domain.validation import REASON_MAX
from ..domain.values import ClaimResult, Decision, QueueHead, ReconcileResult, SettleResult
from . import heads, rows, vendor, waits
from .as_stored import reading_as_stored

if TYPE_CHECKING:
    pass

CLAIM_ATTEMPTS = 4


@dataclass(frozen=True, kw_only=True, slots=True)
class Partition:
    """The lanes a worker serves: only ``lanes`` (if any), never ``exclude_lanes``."""

    lanes: tuple[str, ...] = ()
    exclude_lanes: tuple[str, ...] = ()


DUE = "(j.retry_at IS NULL OR j.retry_at <= %s OR j.cancellation_id IS NOT NULL)"
#: A ready flag set by hand beside a running job of its queue is skipped, never claimed
#: into a second run (one probe of the one-running-per-queue index). A cancelled job
#: settles unrun, so it may go beside one. Two ready jobs of one queue in a claim: only
#: the better is taken (``nth_of_queue``); the queue's next settle puts the flags right.
BESIDE_NOTHING_RUNNING = """(j.cancellation_id IS NOT NULL OR NOT EXISTS (
        SELECT 1 FROM watchdog_job r WHERE r.queue = j.queue AND r.state = 'running'))"""

#: What a claim writes to each ``taken`` row it ``picked`` (``n``: its rank in the claim): a
#: cancelled job settles ``cancelled`` unrun, any other runs under a fresh token.
CLAIM_SET = """
    state = CASE WHEN picked.cancelled THEN 'settled' ELSE 'running' END,
    outcome = CASE WHEN picked.cancelled THEN 'cancelled' END,
    ready = FALSE,
    claim_token = CASE WHEN picked.cancelled THEN NULL ELSE %s || '.' || picked.n END,
    claimed_by = CASE WHEN picked.cancelled THEN NULL ELSE %s END,
    started_at = CASE WHEN picked.cancelled THEN taken.started_at ELSE <NOW> END,
    settled_at = CASE WHEN picked.cancelled THEN <NOW> END,
    attempts = CASE WHEN picked.cancelled THEN taken.attempts ELSE taken.attempts + 1 END,
    retry_at = NULL
"""
CLAIM_POSTGRES = f"""
WITH candidate AS (
    SELECT j.id, j.queue, j.priority, j.position, j.cancellation_id IS NOT NULL AS cancelled
      FROM watchdog_job j
      JOIN watchdog_queue q ON q.name = j.queue
     WHERE j.ready = <TRUE> AND {{lanes}} AND {DUE} AND {BESIDE_NOTHING_RUNNING}
     ORDER BY j.priority DESC, j.position ASC
     LIMIT %s
       FOR UPDATE OF q SKIP LOCKED
),
picked AS (
    SELECT id, cancelled, row_number() OVER () AS n FROM (
        SELECT id, cancelled,
               row_number() OVER (PARTITION BY queue, cancelled ORDER BY priority DESC, position)
                   AS nth_of_queue
          FROM candidate) AS ranked
     WHERE cancelled OR nth_of_queue = 1
)
UPDATE watchdog_job AS taken SET {CLAIM_SET}
  FROM picked
 WHERE taken.id = picked.id AND taken.ready = <TRUE> AND taken.state = 'queued'
RETURNING <taken.COLUMNS>
"""
#: SQLite: the same in one statement (the write transaction already excludes other
#: claimers, so no lock is needed). The best ready rows are picked through the claim index
#: and numbered after the ``LIMIT``.
CLAIM_SQLITE = f"""
UPDATE watchdog_job AS taken SET {CLAIM_SET}
  FROM (SELECT id, cancelled, row_number() OVER () AS n FROM (
            SELECT id, cancelled, row_number() OVER (
                       PARTITION BY queue, cancelled ORDER BY priority DESC, position
                   ) AS nth_of_queue FROM (
                SELECT j.id, j.queue, j.priority, j.position,
                       j.cancellation_id IS NOT NULL AS cancelled
                  FROM watchdog_job j
                 WHERE j.ready = <TRUE> AND {{lanes}} AND {DUE} AND {BESIDE_NOTHING_RUNNING}
                 ORDER BY j.priority DESC, j.position ASC
                 LIMIT %s))
          WHERE cancelled OR nth_of_queue = 1) AS picked
 WHERE taken.id = picked.id AND taken.state = 'queued'
RETURNING <COLUMNS>
"""
ANY_READY = (
    "SELECT 1 FROM watchdog_job j"
    f" WHERE j.ready = <TRUE> AND {{lanes}} AND {DUE} AND {BESIDE_NOTHING_RUNNING} LIMIT 1"
)
SETTLE = """
UPDATE watchdog_job SET
    state = 'settled',
    outcome = CASE WHEN cancellation_id IS NULL THEN %s ELSE 'cancelled' END,
    failure_reason = CASE WHEN cancellation_id IS NULL THEN %s END,
    result = %s,
    traceback = %s,
    settled_at = <NOW>
 WHERE job_id = %s AND state = 'running' AND claim_token = %s
RETURNING <COLUMNS>
"""
RETRY = """
UPDATE watchdog_job SET
    state = CASE WHEN cancellation_id IS NULL THEN 'queued' ELSE 'settled' END,
    outcome = CASE WHEN cancellation_id IS NULL THEN NULL ELSE 'cancelled' END,
    claim_token = CASE WHEN cancellation_id IS NULL THEN NULL ELSE claim_token END,
    claimed_by = CASE WHEN cancellation_id IS NULL THEN NULL ELSE claimed_by END,
    retry_at = CASE WHEN cancellation_id IS NULL THEN %s END,
    ready = cancellation_id IS NULL,
    traceback = %s,
    settled_at = CASE WHEN cancellation_id IS NULL THEN NULL ELSE <NOW> END
 WHERE job_id = %s AND state = 'running' AND claim_token = %s
RETURNING <COLUMNS>
"""
PRIOR = "SELECT state, outcome, claim_token, cancellation_id FROM watchdog_job WHERE job_id = %s"


def new_claim_token() -> str:
    """A claim's token prefix: each job it claims gets ``<prefix>.<rank>``.

    A caller that makes the prefix before claiming knows, if the claim fails, exactly
    which rows it may have claimed unseen (``lost_claims``).
    """
    return secrets.token_urlsafe(24)


def claim(
    using: str,
    partition: Partition,
    *,
    worker_id: str | None = None,
    token: str | None = None,
) -> ClaimResult:
    """Take the best ready job of the partition: run it, or settle it if it was cancelled.

    On PostgreSQL the candidate's queue row is locked with SKIP LOCKED, so concurrent
    claimers spread over queues instead of waiting on each other. ``token``: the claim's
    token prefix (a fresh one if ``None``); of the attempts below, only one writes a row.
    """
    token = token or new_claim_token()
    for _ in range(CLAIM_ATTEMPTS):
        with claim_transaction(using):
            result = claim_in_transaction(using, partition, worker_id, token=token)
        if result is not None:
            if isinstance(result, WatchdogError):
                raise result
            return result
        if not _any_ready(using, partition):
            break
    return ClaimResult(status="none")


def claim_transaction(using: str) -> AbstractContextManager[Any]:
    """The transaction a claim needs: none on PostgreSQL without ``queue_changed``
    receivers, where the claim is one statement (atomic on its own, and one round trip
    instead of three: an idle worker's wake-up latency); a block everywhere else."""
    if vendor.is_postgres(using) and not heads.listening():
        return nullcontext()
    return transaction.atomic(using=using)


def _lanes(partition: Partition) -> tuple[str, list[str]]:
    return vendor.lane_predicate("j.lane", partition.lanes, partition.exclude_lanes)


def _any_ready(using: str, partition: Partition) -> bool:
    predicate, params = _lanes(partition)
    now = vendor.param_datetime(using, timezone.now())
    return bool(vendor.fetch(using, ANY_READY.format(lanes=predicate), (*params, now)))


def claim_statement(
    using: str,
    partition: Partition,
    *,
    token: str = "",
    worker_id: str | None = None,
    limit: int = 1,
) -> tuple[str, list[Any]]:
    """The statement that takes up to ``limit`` of the best ready jobs, with its params.

    Each claim token is ``token`` plus the job's rank in the claim. The index test
    EXPLAINs exactly this, so a refactor cannot silently make claims scan.
    """
    predicate, params = _lanes(partition)
    at = vendor.param_datetime(using, timezone.now())
    if vendor.is_postgres(using):
        sql = vendor.render(using, CLAIM_POSTGRES.format(lanes=predicate))
        return sql, [*params, at, limit, token, worker_id]
    sql = vendor.render(using, CLAIM_SQLITE.format(lanes=predicate))
    return sql, [token, worker_id, *params, at, limit]


def claim_in_transaction(
    using: str, partition: Partition, worker_id: str | None, *, token: str | None = None
) -> ClaimResult | WatchdogError | None:
    """One claim inside the caller's transaction; ``None`` when no ready job was taken."""
    taken = claim_ready(using, partition, 1, worker_id, token=token)
    return taken[0] if taken else None


def claim_ready(
    using: str,
    partition: Partition,
    limit: int,
    worker_id: str | None,
    *,
    token: str | None = None,
) -> list[ClaimResult | WatchdogError]:
    """Take up to ``limit`` ready jobs in one statement, best first, under the token
    prefix ``token`` (a fresh one if ``None``)."""
    sql, params = claim_statement(
        using, partition, token=token or new_claim_token(), worker_id=worker_id, limit=limit
    )
    found = vendor.fetch(using, sql, params)
    if len(found) > 1:
        priority, position = rows.column_index("priority"), rows.column_index("position")
        found.sort(key=lambda row: (-row[priority], row[position] or 0))
    return [_taken(using, row) for row in found]


def _taken(using: str, row: Sequence[Any]) -> ClaimResult | WatchdogError:
    """The claim result of one row a claim statement changed."""
    try:
        job = rows.to_job(using, row)
    except WatchdogError as error:
        if error.kind == "store_unavailable":
            return _quarantine(using, row, error)
        raise
    if job.state == State.SETTLED:
        with transaction.atomic(using=using):  # the claim may have run in autocommit
            vendor.lock_queue(using, job.queue)
            head = heads.refresh(using, job.queue)
            heads.announce(job.queue, head, job, using=using)
        return ClaimResult(status="cancelled", job=job)
    if heads.listening():
        head = QueueHead(
            state="running",
            job_id=job.job_id,
            cancellation_requested=job.cancellation_id is not None,
        )
        heads.announce(job.queue, head, using=using)
    return ClaimResult(status="claimed", job=job, claim_token=job.claim_token)


def _quarantine(using: str, row: Sequence[Any], error: WatchdogError) -> WatchdogError:
    """Settle a claimed row we cannot decode ``failed``, so workers move on; report it.

    ``queue_changed`` is sent with the new head and ``settled=None`` (the row is no ``Job``).
    """
    from ..models import Job

    pk = row[rows.column_index("id")]
    queue = row[rows.column_index("queue")]
    reason = f"Job row does not decode: {error}"[:REASON_MAX]
    with transaction.atomic(using=using):  # the claim may have run in autocommit
        vendor.lock_queue(using, str(queue))
        Job.objects.using(using).filter(pk=pk, state=State.RUNNING).update(
            state=State.SETTLED,
            outcome=Outcome.FAILED,
            failure_reason=reason,
            ready=False,
            settled_at=Now(),
        )
        head = heads.refresh(using, str(queue))
        # Like every change, inside its transaction; the row cannot be a Job, so no settled.
        heads.announce(str(queue), head, using=using)
    return error


def settle(
    using: str,
    job_id: str,
    claim_token: str,
    decision: Decision,
    *,
    claim_next: Partition | None = None,
    worker_id: str | None = None,
    token: str | None = None,
) -> tuple[SettleResult, ClaimResult | WatchdogError | None]:
    """Settle a running job for the holder of its current claim token (fencing).

    A failure with ``retry_at`` goes back to its queue, pinned at the head until then.
    With ``claim_next``, the next ready job of that partition is claimed in the same
    transaction (one commit per job for a busy worker); a row that did not decode comes
    back as the ``WatchdogError`` it raised, already settled ``failed``.
    """
    with transaction.atomic(using=using):
        # A worker that claims on in this transaction will take the head it readies (or
        # a better job), so it need not wake anyone for that head's lanes: NOTIFY makes
        # PostgreSQL serialise committing transactions, which would cap the drain rate.
        busy = claim_next.lanes if claim_next is not None else ()
        settled = settle_in_transaction(using, job_id, claim_token, decision, quiet_lanes=busy)
        claimed = None
        if claim_next is not None and settled.status != "missing":
            claimed = claim_in_transaction(using, claim_next, worker_id, token=token)
    return settled, claimed


def settle_in_transaction(
    using: str,
    job_id: str,
    claim_token: str,
    decision: Decision,
    *,
    quiet_lanes: Sequence[str] = (),
) -> SettleResult:
    queue = vendor.lock_queue_of(using, job_id)
    if queue is None:
        return SettleResult(status="missing")
    if decision.retry_at is not None and decision.outcome == Outcome.FAILED:
        changed = vendor.fetch(
            using,
            RETRY,
            (
                vendor.param_datetime(using, decision.retry_at),
                decision.traceback,
                job_id,
                claim_token,
            ),
        )
    else:
        reason = decision.failure_reason if decision.outcome == Outcome.FAILED else None
        if decision.outcome == Outcome.FAILED and not reason:
            reason = "Failed without a reason"
        settle_params = (
            decision.outcome.value,
            reason,
            vendor.param_json(using, decision.result),
            decision.traceback,
            job_id,
            claim_token,
        )
        if vendor.is_postgres(using):
            return _settle_postgres(
                using, queue, job_id, claim_token, decision, settle_params, quiet_lanes
            )
        changed = vendor.fetch(using, SETTLE, settle_params)
    if not changed:
        return unchanged(using, job_id, claim_token, decision)
    job = rows.to_job(using, changed[0], as_stored=True)
    head = heads.refresh(using, queue)
    if job.state == State.QUEUED:
        heads.announce(queue, head, using=using)
        return SettleResult(status="retrying", job=job)
    heads.announce(queue, head, job, using=using)
    return SettleResult(status="settled", job=job)


def _settle_postgres(
    using: str,
    queue: str,
    job_id: str,
    claim_token: str,
    decision: Decision,
    settle_params: tuple[Any, ...],
    quiet_lanes: Sequence[str],
) -> SettleResult:
    """Settle, pick the queue's next head and mark it ready, in one round trip.

    The newly ready head wakes idle workers (NOTIFY) unless its lane is in ``quiet_lanes``.

    The statement's snapshot still shows the settling job running, so the head query
    skips it; every other row of the queue is current because we hold the queue's lock.
    """
    from ..conf import setting

    refresh = heads.REFRESH_POSTGRES.format(
        head=heads.HEAD.format(not_settling="AND job_id <> %s"),
        only_if="AND EXISTS (SELECT 1 FROM settled)",
    )
    sql = (
        "WITH settled AS ("
        + SETTLE
        + "), "
        + refresh.strip().removeprefix("WITH ")
        + " SELECT settled.*, head.* FROM settled LEFT JOIN head ON TRUE"
    )
    params = (
        *settle_params,
        queue,
        job_id,
        queue,
        queue,
        list(quiet_lanes),
        setting("NOTIFY_CHANNEL"),
        queue,
        [],
    )
    found = vendor.fetch(using, sql, params)
    if not found:
        return unchanged(using, job_id, claim_token, decision)
    width = len(rows.job_fields())
    job = rows.to_job(using, found[0][:width], as_stored=True)
    head_row = found[0][width:]
    head = heads.head_of(None if head_row[0] is None else head_row)
    heads.announce(queue, head, job, using=using)
    return SettleResult(status="settled", job=job)


def unchanged(using: str, job_id: str, claim_token: str, decision: Decision) -> SettleResult:
    """Why a fenced settle changed nothing: ``replayed``, ``conflict`` or ``missing``."""
    from ..models import Job

    prior = vendor.fetch(using, PRIOR, (job_id,))
    if not prior:
        return SettleResult(status="missing")
    state, outcome, token, cancellation_id = prior[0]
    effective = Outcome.CANCELLED if cancellation_id is not None else decision.outcome
    if state == State.SETTLED and token == claim_token and outcome == effective:
        return SettleResult(status="replayed", job=Job.objects.using(using).get(job_id=job_id))
    return SettleResult(status="conflict")


def reconcile(using: str, job_id: str, claim_token: str) -> ReconcileResult:
    """Resolve a running job whose execution disappeared, exactly once (SPEC §4.8)."""
    from ..models import Job

    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        queue = vendor.lock_queue_of(using, job_id)
        if queue is None:
            return ReconcileResult(status="missing")
        prior = (
            jobs.filter(job_id=job_id)
            .values_list(
                "pk", "state", "claim_token", "cancellation_id", "max_recoveries", "recovery_count"
            )
            .first()
        )
        if prior is None:  # pragma: no cover - the lock query found it
            return ReconcileResult(status="missing")
        pk, state, token, cancellation_id, max_recoveries, recovery_count = prior
        if state != State.RUNNING or token != claim_token:
            return ReconcileResult(status="conflict")
        running = jobs.filter(pk=pk, state=State.RUNNING, claim_token=claim_token)
        if (
            cancellation_id is None
            and max_recoveries is not None
            and (recovery_count < max_recoveries)
        ):
            # Back in its old place: same priority and position.
            running.update(
                state=State.QUEUED,
                claim_token=None,
                claimed_by=None,
                started_at=None,
                recovery_count=recovery_count + 1,
            )
            heads.announce(queue, heads.refresh(using, queue), using=using)
            with reading_as_stored():  # a row edited by hand must not stop recovery
                return ReconcileResult(status="requeued", job=jobs.get(pk=pk))
        if cancellation_id is not None:
            outcome, reason = Outcome.CANCELLED, None
        elif max_recoveries is None:
            outcome, reason = Outcome.INTERRUPTED, states.NO_RECOVERY_POLICY_REASON
        else:
            outcome, reason = Outcome.INTERRUPTED, states.budget_exhausted_reason(max_recoveries)
        running.update(
            state=State.SETTLED, outcome=outcome, failure_reason=reason, settled_at=Now()
        )
        with reading_as_stored():  # a row edited by hand must not stop recovery
            job = jobs.get(pk=pk)
        heads.announce(queue, heads.refresh(using, queue), job, using=using)
        return ReconcileResult(status="settled", job=job)


def release(using: str, job_id: str, claim_token: str) -> bool:
    """Put a claimed job whose handler never started back in its place, uncounted.

    For a worker that lost its connection while committing a claim: the claim may have
    committed without the worker learning its token. Returns whether the job was released.
    """
    with transaction.atomic(using=using):
        return release_in_transaction(using, job_id, claim_token)


def release_in_transaction(using: str, job_id: str, claim_token: str) -> bool:
    """``release`` inside the caller's transaction."""
    from ..models import Job

    queue = vendor.lock_queue_of(using, job_id)
    if queue is None:
        return False
    changed = (
        Job.objects.using(using)
        .filter(job_id=job_id, state=State.RUNNING, claim_token=claim_token)
        .update(
            state=State.QUEUED,
            claim_token=None,
            claimed_by=None,
            started_at=None,
            attempts=F("attempts") - 1,
        )
    )
    if changed:
        heads.announce(queue, heads.refresh(using, queue), using=using)
    return bool(changed)


def lost_claims(using: str, worker_id: str, tokens: Sequence[str]) -> list[tuple[str, str]]:
    """(job id, claim token) of jobs running under ``worker_id`` that claims with these
    token prefixes took (see ``new_claim_token``)."""
    from ..models import Job

    if not tokens:
        return []
    made_by = Q()
    for token in tokens:
        made_by |= Q(claim_token__startswith=f"{token}.")
    found = (
        Job.objects.using(using)
        .filter(made_by, state=State.RUNNING, claimed_by=worker_id)
        .values_list("job_id", "claim_token")
    )
    return [(job_id, token) for job_id, token in found if token is not None]


def disappeared_claims(
    using: str,
    *,
    timeout: float,
    dead_workers: Sequence[str] = (),
    alive_workers: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """(job id, claim token) of running jobs whose worker is dead or has gone silent.

    A worker is silent when its last heartbeat is older than ``timeout`` seconds on the
    database's clock (heartbeats are stamped with it too, so no host's clock takes part), or
    when it has no row. ``dead_workers`` are dead whatever their heartbeat says;
    ``alive_workers`` (the asking worker, the same host's live processes) are alive whatever
    it says.
    """
    from ..models import Job, Worker

    live = Worker.objects.using(using).filter(heartbeat_at__gte=vendor.DatabaseClock(timeout))
    if dead_workers:
        live = live.exclude(worker_id__in=list(dead_workers))
    running = Job.objects.using(using).filter(state=State.RUNNING)
    # exclude() keeps rows whose claimed_by is NULL: a claim with no worker is never live.
    stale = running.exclude(claimed_by__in=live.values("worker_id")).order_by("id")
    if alive_workers:
        stale = stale.exclude(claimed_by__in=list(alive_workers))
    return _claims(stale)


def claims_of(using: str, workers: Sequence[str]) -> list[tuple[str, str]]:
    """(job id, claim token) of the running jobs of ``workers``."""
    from ..models import Job

    if not workers:
        return []
    running = Job.objects.using(using).filter(state=State.RUNNING, claimed_by__in=list(workers))
    return _claims(running.order_by("id"))


def _claims(running: Any) -> list[tuple[str, str]]:
    return [
        (job_id, token)
        for job_id, token in running.values_list("job_id", "claim_token")
        if token is not None
    ]


def recover(
    using: str,
    *,
    timeout: float,
    dead_workers: Sequence[str] = (),
    alive_workers: Sequence[str] = (),
) -> list[ReconcileResult]:
    """Reconcile every disappeared claim; concurrent reapers each win a claim at most once."""
    found = disappeared_claims(
        using, timeout=timeout, dead_workers=dead_workers, alive_workers=alive_workers
    )
    return reconcile_all(using, found)


def reconcile_all(using: str, found: Sequence[tuple[str, str]]) -> list[ReconcileResult]:
    """Reconcile each (job id, claim token); the results of those this call changed.

    With bounded lock waits (``waits.bounded``), a claim whose queue another transaction
    holds (a worker stopped inside it, say) comes back ``deferred`` and the rest go on.
    """
    results = []
    for job_id, token in found:
        try:
            result = reconcile(using, job_id, token)
        except OperationalError as error:
            if waits.limit() is None or not waits.is_lock_busy(error):
                raise
            result = ReconcileResult(status="deferred", job_id=job_id)
        if result.status in ("requeued", "settled", "deferred"):
            results.append(result)
    return results
