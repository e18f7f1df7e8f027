"""Claim, settle and reconcile: the running half of a job's life (SPEC §4.3–4.5, §4.8).

Every verb locks the job's queue first, then changes the job with a conditional update
on (job, state, claim token): zero rows is a reported conflict, never an overwrite.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from django.db import OperationalError, transaction
from django.db.models import F, Q
from django.db.models.functions import Now
from django.utils import timezone

from ..domain import states
from ..domain.as_stored import reading_as_stored
from ..domain.errors import WatchdogError
from ..domain.states import Outcome, State
from ..domain.validation import REASON_MAX
from ..domain.values import ClaimResult, Decision, QueueHead, ReconcileResult, SettleResult
from ..models import Job, Worker
from . import heads, rows, waits
from .clock import DatabaseClock
from .dialects import dialect, lane_predicate

CLAIM_ATTEMPTS = 4


@dataclass(frozen=True, kw_only=True, slots=True)
class Partition:
    """The lanes a worker serves: only ``lanes`` (if any), never ``exclude_lanes``."""

    lanes: tuple[str, ...] = ()
    exclude_lanes: tuple[str, ...] = ()


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
    """The transaction a claim needs (the dialect's: none where the claim is one statement
    and no ``queue_changed`` receiver needs one)."""
    return dialect(using).claim_transaction(announcing=heads.listening())


def _lanes(partition: Partition) -> tuple[str, dict[str, str]]:
    return lane_predicate("j.lane", partition.lanes, partition.exclude_lanes)


def _any_ready(using: str, partition: Partition) -> bool:
    predicate, params = _lanes(partition)
    d = dialect(using)
    now = d.param_datetime(timezone.now())
    return bool(d.fetch(d.any_ready_sql(predicate), {**params, "now": now}))


def claim_statement(
    using: str,
    partition: Partition,
    *,
    token: str = "",
    worker_id: str | None = None,
    limit: int = 1,
) -> tuple[str, dict[str, Any]]:
    """The statement that takes up to ``limit`` of the best ready jobs, with its params.

    Each claim token is ``token`` plus the job's rank in the claim. The index test
    EXPLAINs exactly this, so a refactor cannot silently make claims scan.
    """
    predicate, params = _lanes(partition)
    d = dialect(using)
    now = d.param_datetime(timezone.now())
    bound = {**params, "now": now, "limit": limit, "token": token, "worker_id": worker_id}
    return d.claim_sql(predicate), bound


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
    found = dialect(using).fetch(sql, params)
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
            dialect(using).lock_queue(job.queue)
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

    pk = row[rows.column_index("id")]
    queue = row[rows.column_index("queue")]
    reason = f"Job row does not decode: {error}"[:REASON_MAX]
    with transaction.atomic(using=using):  # the claim may have run in autocommit
        dialect(using).lock_queue(str(queue))
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
    d = dialect(using)
    queue = d.lock_queue_of(job_id)
    if queue is None:
        return SettleResult(status="missing")
    if decision.retry_at is not None and decision.outcome == Outcome.FAILED:
        changed = d.fetch(
            d.RETRY,
            {
                "retry_at": d.param_datetime(decision.retry_at),
                "traceback": decision.traceback,
                "job_id": job_id,
                "claim_token": claim_token,
            },
        )
        if not changed:
            return unchanged(using, job_id, claim_token, decision)
        job = rows.to_job(using, changed[0], as_stored=True)
        head = heads.refresh(using, queue)
        if job.state == State.QUEUED:
            heads.announce(queue, head, using=using)
            return SettleResult(status="retrying", job=job)
        heads.announce(queue, head, job, using=using)
        return SettleResult(status="settled", job=job)
    reason = decision.failure_reason if decision.outcome == Outcome.FAILED else None
    if decision.outcome == Outcome.FAILED and not reason:
        reason = "Failed without a reason"
    params = {
        "outcome": decision.outcome.value,
        "reason": reason,
        "result": d.param_json(decision.result),
        "traceback": decision.traceback,
        "job_id": job_id,
        "claim_token": claim_token,
    }
    found = d.settle_and_refresh(params, queue, quiet_lanes)
    if found is None:
        return unchanged(using, job_id, claim_token, decision)
    row, head_row = found
    job = rows.to_job(using, row, as_stored=True)
    heads.announce(queue, heads.head_of(head_row), job, using=using)
    return SettleResult(status="settled", job=job)


def unchanged(using: str, job_id: str, claim_token: str, decision: Decision) -> SettleResult:
    """Why a fenced settle changed nothing: ``replayed``, ``conflict`` or ``missing``."""

    d = dialect(using)
    prior = d.fetch(d.PRIOR, {"job_id": job_id})
    if not prior:
        return SettleResult(status="missing")
    state, outcome, token, cancellation_id = prior[0]
    effective = Outcome.CANCELLED if cancellation_id is not None else decision.outcome
    if state == State.SETTLED and token == claim_token and outcome == effective:
        return SettleResult(status="replayed", job=Job.objects.using(using).get(job_id=job_id))
    return SettleResult(status="conflict")


def reconcile(using: str, job_id: str, claim_token: str) -> ReconcileResult:
    """Resolve a running job whose execution disappeared, exactly once (SPEC §4.8)."""

    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        queue = dialect(using).lock_queue_of(job_id)
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

    queue = dialect(using).lock_queue_of(job_id)
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

    live = Worker.objects.using(using).filter(heartbeat_at__gte=DatabaseClock(timeout))
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
