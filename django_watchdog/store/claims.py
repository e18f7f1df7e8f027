"""Claim, settle and reconcile: the running half of a job's life (SPEC §4.3–4.5, §4.8).

Every verb locks the job's queue first, then changes the job with a conditional update
on (job, state, claim token): zero rows is a reported conflict, never an overwrite.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from ..domain import states
from ..domain.errors import WatchdogError
from ..domain.states import Outcome, State
from ..domain.validation import REASON_MAX
from ..domain.values import ClaimResult, Decision, ReconcileResult, SettleResult
from . import heads, vendor

if TYPE_CHECKING:
    from ..models import Job

CLAIM_ATTEMPTS = 8

SELECT_READY_POSTGRES = """
SELECT j.id, j.queue, j.cancellation_id
  FROM watchdog_job j
  JOIN watchdog_queue q ON q.name = j.queue
 WHERE j.ready AND {lanes}
 ORDER BY j.priority DESC, j.id ASC
 LIMIT 1
   FOR UPDATE OF q SKIP LOCKED
"""

SELECT_READY_SQLITE = """
SELECT j.id, j.queue, j.cancellation_id
  FROM watchdog_job j
 WHERE j.ready AND {lanes}
 ORDER BY j.priority DESC, j.id ASC
 LIMIT 1
"""


def new_claim_token() -> str:
    return secrets.token_urlsafe(24)


def claim(
    using: str,
    *,
    lanes: Sequence[str] = (),
    exclude_lanes: Sequence[str] = (),
    worker_id: str | None = None,
) -> ClaimResult:
    """Take the best ready job of the lane partition: run it, or settle it if cancelled.

    On PostgreSQL the candidate's queue row is locked with SKIP LOCKED, so concurrent
    claimers spread over queues instead of waiting on each other.
    """
    postgres = vendor.is_postgres(using)
    predicate, params = vendor.lane_predicate("j.lane", lanes, exclude_lanes)
    sql = (SELECT_READY_POSTGRES if postgres else SELECT_READY_SQLITE).format(lanes=predicate)
    for _ in range(CLAIM_ATTEMPTS):
        with transaction.atomic(using=using):
            rows = vendor.fetch(using, sql, params)
            if not rows:
                return ClaimResult(status="none")
            pk, queue, cancellation_id = rows[0]
            result = _take(
                using, pk, queue, cancelled=cancellation_id is not None, worker_id=worker_id
            )
        if result is not None:
            if isinstance(result, WatchdogError):
                raise result
            return result
    return ClaimResult(status="none")


def _take(
    using: str, pk: int, queue: str, *, cancelled: bool, worker_id: str | None
) -> ClaimResult | WatchdogError | None:
    """Move one ready job on, under its queue's lock; ``None`` if it changed meanwhile."""
    from ..models import Job

    jobs = Job.objects.using(using)
    now = timezone.now()
    if cancelled:
        changed = jobs.filter(pk=pk, state=State.QUEUED, ready=True).update(
            state=State.SETTLED, outcome=Outcome.CANCELLED, ready=False, settled_at=now
        )
        if not changed:
            return None
        head, wake = heads.refresh(using, queue)
        if wake is not None:
            vendor.notify(using, wake)
        job = jobs.get(pk=pk)
        heads.announce(queue, head, job)
        return ClaimResult(status="cancelled", job=job)
    token = new_claim_token()
    changed = jobs.filter(pk=pk, state=State.QUEUED, ready=True, cancellation_id=None).update(
        state=State.RUNNING, ready=False, claim_token=token, claimed_by=worker_id, started_at=now
    )
    if not changed:
        return None
    head = heads.read(using, queue)
    try:
        job = jobs.get(pk=pk)
    except WatchdogError as error:
        # The row was edited into something we cannot decode: settle it failed so the
        # worker moves on, and report it for this job only.
        reason = f"Job row does not decode: {error}"[:REASON_MAX]
        jobs.filter(pk=pk, state=State.RUNNING, claim_token=token).update(
            state=State.SETTLED, outcome=Outcome.FAILED, failure_reason=reason, settled_at=now
        )
        head, wake = heads.refresh(using, queue)
        if wake is not None:
            vendor.notify(using, wake)
        return error
    heads.announce(queue, head)
    return ClaimResult(status="claimed", job=job, claim_token=token)


def settle(using: str, job_id: str, claim_token: str, decision: Decision) -> SettleResult:
    """Settle a running job for the holder of its current claim token (fencing)."""
    from ..models import Job

    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        queue = jobs.filter(job_id=job_id).values_list("queue", flat=True).first()
        if queue is None:
            return SettleResult(status="missing")
        vendor.lock_queue(using, queue)
        prior = (
            jobs.filter(job_id=job_id)
            .values_list("pk", "state", "outcome", "claim_token", "cancellation_id")
            .first()
        )
        if prior is None:
            return SettleResult(status="missing")
        pk, state, outcome, token, cancellation_id = prior
        effective = Outcome.CANCELLED if cancellation_id is not None else decision.outcome
        if state == State.SETTLED:
            if token == claim_token and outcome == effective:
                return SettleResult(status="replayed", job=jobs.get(pk=pk))
            return SettleResult(status="conflict")
        if state != State.RUNNING or token != claim_token:
            return SettleResult(status="conflict")
        reason = decision.failure_reason if effective == Outcome.FAILED else None
        if effective == Outcome.FAILED and reason is None:
            reason = "Failed without a reason"
        changed = jobs.filter(pk=pk, state=State.RUNNING, claim_token=claim_token).update(
            state=State.SETTLED,
            outcome=effective,
            failure_reason=reason,
            result=decision.result,
            traceback=decision.traceback,
            settled_at=timezone.now(),
        )
        if not changed:  # pragma: no cover - the queue lock excludes this
            return SettleResult(status="conflict")
        return SettleResult(status="settled", job=_after_settle(using, queue, pk))


def _after_settle(using: str, queue: str, pk: int) -> Job:
    from ..models import Job

    head, wake = heads.refresh(using, queue)
    if wake is not None:
        vendor.notify(using, wake)
    job = Job.objects.using(using).get(pk=pk)
    heads.announce(queue, head, job)
    return job


def reconcile(using: str, job_id: str, claim_token: str) -> ReconcileResult:
    """Resolve a running job whose execution disappeared, exactly once (SPEC §4.8)."""
    from ..models import Job

    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        queue = jobs.filter(job_id=job_id).values_list("queue", flat=True).first()
        if queue is None:
            return ReconcileResult(status="missing")
        vendor.lock_queue(using, queue)
        prior = (
            jobs.filter(job_id=job_id)
            .values_list(
                "pk", "state", "claim_token", "cancellation_id", "max_recoveries", "recovery_count"
            )
            .first()
        )
        if prior is None:
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
            running.update(
                state=State.QUEUED,
                claim_token=None,
                claimed_by=None,
                started_at=None,
                recovery_count=recovery_count + 1,
            )
            head, wake = heads.refresh(using, queue)
            if wake is not None:
                vendor.notify(using, wake)
            heads.announce(queue, head)
            return ReconcileResult(status="requeued", job=jobs.get(pk=pk))
        if cancellation_id is not None:
            outcome, reason = Outcome.CANCELLED, None
        elif max_recoveries is None:
            outcome, reason = Outcome.INTERRUPTED, states.NO_RECOVERY_POLICY_REASON
        else:
            outcome, reason = Outcome.INTERRUPTED, states.budget_exhausted_reason(max_recoveries)
        running.update(
            state=State.SETTLED, outcome=outcome, failure_reason=reason, settled_at=timezone.now()
        )
        return ReconcileResult(status="settled", job=_after_settle(using, queue, pk))


def release(using: str, job_id: str, claim_token: str) -> bool:
    """Put a claimed job whose handler never started back in its place, uncounted.

    For a worker that lost its connection while committing a claim: the claim may have
    committed without the worker learning its token. Returns whether the job was released.
    """
    from ..models import Job

    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        queue = jobs.filter(job_id=job_id).values_list("queue", flat=True).first()
        if queue is None:
            return False
        vendor.lock_queue(using, queue)
        changed = jobs.filter(job_id=job_id, state=State.RUNNING, claim_token=claim_token).update(
            state=State.QUEUED, claim_token=None, claimed_by=None, started_at=None
        )
        if changed:
            head, wake = heads.refresh(using, queue)
            if wake is not None:
                vendor.notify(using, wake)
            heads.announce(queue, head)
    return bool(changed)


def orphaned_claims(using: str, worker_id: str, known: Sequence[str]) -> list[tuple[str, str]]:
    """(job id, claim token) of jobs running under ``worker_id`` that it does not know of."""
    from ..models import Job

    rows = (
        Job.objects.using(using)
        .filter(state=State.RUNNING, claimed_by=worker_id)
        .exclude(job_id__in=list(known))
        .values_list("job_id", "claim_token")
    )
    return [(job_id, token) for job_id, token in rows if token is not None]


def disappeared_claims(
    using: str,
    *,
    now: datetime,
    timeout: float,
    dead_workers: Sequence[str] = (),
    alive: str | None = None,
) -> list[tuple[str, str]]:
    """(job id, claim token) of running jobs whose worker is dead or has no recent heartbeat.

    ``alive`` names the asking worker: it knows it is alive even if its own heartbeat lagged.
    """
    from datetime import timedelta

    from ..models import Job, Worker

    live = Worker.objects.using(using).filter(heartbeat_at__gte=now - timedelta(seconds=timeout))
    if dead_workers:
        live = live.exclude(worker_id__in=list(dead_workers))
    running = Job.objects.using(using).filter(state=State.RUNNING)
    # exclude() keeps rows whose claimed_by is NULL: a claim with no worker is never live.
    stale = running.exclude(claimed_by__in=live.values("worker_id")).order_by("id")
    if alive is not None:
        stale = stale.exclude(claimed_by=alive)
    return [
        (job_id, token)
        for job_id, token in stale.values_list("job_id", "claim_token")
        if token is not None
    ]


def recover(
    using: str,
    *,
    now: datetime,
    timeout: float,
    dead_workers: Sequence[str] = (),
    alive: str | None = None,
) -> list[ReconcileResult]:
    """Reconcile every disappeared claim; concurrent reapers each win a claim at most once."""
    results = []
    for job_id, token in disappeared_claims(
        using, now=now, timeout=timeout, dead_workers=dead_workers, alive=alive
    ):
        result = reconcile(using, job_id, token)
        if result.status in ("requeued", "settled"):
            results.append(result)
    return results
