"""Recovery: resolve claims whose execution disappeared (SPEC §4.8), and put back claims a
worker lost before it started them.

Like every change to a queue, each locks the queue first and changes the job with a
conditional update on (job, state, claim token): a claim that moved on is a ``conflict``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import OperationalError, transaction
from django.db.models import F, Q
from django.db.models.functions import Now

from ..domain import states
from ..domain.as_stored import reading_as_stored
from ..domain.states import Outcome, State
from ..domain.values import ReconcileResult
from ..models import Job, Worker
from . import deadlocks, heads, waits
from .clock import DatabaseClock
from .dialects import dialect


@deadlocks.retried
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


@deadlocks.retried
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
