"""Pruned job ids: the identity of jobs retention deleted, kept for ``ID_RETENTION``.

Without ``WATCHDOG["ID_RETENTION"]`` the idempotency window of a job id is the retention
period: once its job is pruned, the id enqueues as a brand-new job. With it, pruning
records each deleted job's identity (in the same transaction as the delete), and enqueue
answers ``duplicate`` for a recorded id until ``ID_RETENTION`` after the job settled.
Enqueue reads the table only while the setting is on, and only for the ids it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from ..conf import age, setting
from ..domain.values import EnqueueResult
from ..models import Job, PrunedJob


def window() -> timedelta | None:
    """``WATCHDOG["ID_RETENTION"]`` as a ``timedelta`` (seconds or a timedelta), or ``None``;
    ``ImproperlyConfigured`` naming the setting if it is no age a cut-off can reach."""
    return age("ID_RETENTION")


def remember(using: str, ids: Sequence[int], *, now: datetime) -> None:
    """Record the identity of the settled jobs ``ids`` (about to be deleted) whose id
    window is still open; the caller's transaction deletes them."""

    keep = window()
    if keep is None:
        return
    found = Job.objects.using(using).filter(pk__in=ids, settled_at__gte=now - keep)
    fields = ("job_id", "queue", "lane", "outcome", "enqueued_at", "settled_at")
    records = [PrunedJob(**dict(zip(fields, v, strict=True))) for v in found.values_list(*fields)]
    PrunedJob.objects.using(using).bulk_create(records, ignore_conflicts=True)


def forget(using: str, *, now: datetime, batch_size: int) -> int:
    """Delete up to ``batch_size`` recorded ids whose window has closed (all of them, oldest
    first, when ``ID_RETENTION`` is off); return how many."""

    recorded = PrunedJob.objects.using(using)
    keep = window()
    expired = recorded if keep is None else recorded.filter(settled_at__lt=now - keep)
    ids = list(expired.order_by("settled_at").values_list("job_id", flat=True)[:batch_size])
    if not ids:
        return 0
    deleted, _ = recorded.filter(job_id__in=ids).delete()
    return deleted


def kept() -> bool:
    """Whether pruned ids are kept (``ID_RETENTION`` is set): enqueue asks this first."""
    return setting("ID_RETENTION") is not None


def duplicates(using: str, job_ids: Sequence[str]) -> dict[str, EnqueueResult]:
    """``duplicate`` results for those of ``job_ids`` recorded as pruned, by id.

    A result's ``job`` is an unsaved ``Job`` (``pk`` is ``None``) holding what was kept:
    id, queue, lane, outcome, enqueue and settle times; no payload or result.
    """

    found = PrunedJob.objects.using(using).filter(job_id__in=list(job_ids))
    return {p.job_id: EnqueueResult(status="duplicate", job=_shell(p)) for p in found}


def _shell(pruned: PrunedJob) -> Job:

    return Job(
        job_id=pruned.job_id,
        queue=pruned.queue,
        lane=pruned.lane,
        state="settled",
        outcome=pruned.outcome,
        enqueued_at=pruned.enqueued_at,
        settled_at=pruned.settled_at,
    )
