"""Cancellation intents (SPEC §4.7): recorded once, honoured when the job is reached.

An intent id names one job's cancellation (``watchdog_job_cancellation_id_unique``, as the
seed's unique column): recording one that another job holds is a ``conflict``.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Coalesce

from ..domain.states import State
from ..domain.values import CancelResult
from ..models import Job
from . import deadlocks, heads
from .dialects import dialect


@deadlocks.retried
def cancel(
    using: str,
    job_id: str,
    cancellation_id: str,
    *,
    only_if_queued: bool,
    requested_by: str | None = None,
) -> CancelResult:
    """Record ``cancellation_id`` (and who asked) on a job; a queued job becomes ready to
    settle cancelled. A replay leaves the first requester recorded."""

    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        queue = jobs.filter(job_id=job_id).values_list("queue", flat=True).first()
        if queue is None:
            return CancelResult(status="missing", cancellation_id=cancellation_id)
        dialect(using).lock_queue(queue)
        prior = (
            jobs.filter(job_id=job_id).values_list("pk", "state", "cancellation_id", "lane").first()
        )
        if prior is None:
            return CancelResult(status="missing", cancellation_id=cancellation_id)
        pk, state, recorded, lane = prior
        if recorded is not None:
            if recorded == cancellation_id:
                return CancelResult(status="replayed", cancellation_id=cancellation_id)
            return CancelResult(status="conflict", cancellation_id=cancellation_id)
        if only_if_queued and state != State.QUEUED:
            return CancelResult(status="conflict", cancellation_id=cancellation_id)
        queued = state == State.QUEUED
        # A queued job with an intent is ready at once (a delayed one joins the order
        # where it was enqueued): the next claim settles it cancelled.
        extra: dict[str, object] = (
            {"ready": True, "delayed": False, "position": Coalesce(F("position"), F("id"))}
            if queued
            else {}
        )
        if requested_by is not None:
            extra["cancellation_requested_by"] = requested_by
        if not _record(using, pk, cancellation_id, extra):
            return CancelResult(status="conflict", cancellation_id=cancellation_id)
        if queued:
            dialect(using).notify(lane)
        # A delayed job just entered the order and may outrank the head: refresh demotes it.
        head = heads.refresh(using, queue, entered=(pk,)) if queued else None
        heads.announce(queue, head, using=using)
    return CancelResult(status="recorded", cancellation_id=cancellation_id)


def _record(using: str, pk: int, cancellation_id: str, extra: dict[str, object]) -> bool:
    """Write the intent on job ``pk``; ``False`` (nothing written) if another job holds
    ``cancellation_id``. The unique index decides, so two cancels racing for one id on
    two queues (two different locks) cannot both record it."""

    jobs = Job.objects.using(using)
    try:
        with transaction.atomic(using=using):  # a savepoint: the caller's block stays usable
            jobs.filter(pk=pk, cancellation_id=None).update(
                cancellation_id=cancellation_id, **extra
            )
    except IntegrityError:
        if jobs.filter(cancellation_id=cancellation_id).exclude(pk=pk).exists():
            return False
        raise
    return True
