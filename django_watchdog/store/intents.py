"""Cancellation intents (SPEC §4.7): recorded once, honoured when the job is reached."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce

from ..domain.states import State
from ..domain.values import CancelResult
from . import heads, vendor


def cancel(using: str, job_id: str, cancellation_id: str, *, only_if_queued: bool) -> CancelResult:
    """Record ``cancellation_id`` on a job; a queued job becomes ready to settle cancelled."""
    from ..models import Job

    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        queue = jobs.filter(job_id=job_id).values_list("queue", flat=True).first()
        if queue is None:
            return CancelResult(status="missing", cancellation_id=cancellation_id)
        vendor.lock_queue(using, queue)
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
        jobs.filter(pk=pk, cancellation_id=None).update(cancellation_id=cancellation_id, **extra)
        if queued:
            vendor.notify(using, lane)
        # A delayed job just entered the order and may outrank the head: refresh demotes it.
        head = heads.refresh(using, queue, entered=(pk,)) if queued else None
        heads.announce(queue, head, using=using)
    return CancelResult(status="recorded", cancellation_id=cancellation_id)
