"""Fail a whole lane (SPEC §4.9): settle its pending jobs ``failed``, in bounded batches."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Now

from ..domain.as_stored import reading_as_stored
from ..domain.states import Outcome, State
from ..domain.values import LaneFailure
from ..models import PENDING_JOBS, Job
from . import deadlocks, heads
from .dialects import dialect

LANE_FAILURE_BATCH = 256


@deadlocks.retried
def fail_lane(using: str, lane: str, reason: str) -> LaneFailure:
    """Settle up to 256 pending jobs of ``lane`` ``failed`` (running first); say if more remain.

    A running job loses its claim token, so its worker's later settle is a conflict.
    """

    jobs = Job.objects.using(using)
    pending = jobs.filter(PENDING_JOBS, lane=lane)
    with transaction.atomic(using=using):
        batch = list(
            pending.order_by("-state", "id").values_list("pk", "queue")[:LANE_FAILURE_BATCH]
        )
        dialect(using).lock_queues([queue for _, queue in batch])
        settled = []
        for pk, queue in batch:
            changed = pending.filter(pk=pk).update(
                state=State.SETTLED,
                outcome=Outcome.FAILED,
                failure_reason=reason,
                claim_token=None,
                ready=False,
                delayed=False,
                position=Coalesce(F("position"), F("id")),
                retry_at=None,
                settled_at=Now(),
            )
            if not changed:
                continue  # settled by its worker before we held the lock
            head = heads.refresh(using, queue)
            with reading_as_stored():  # a row edited by hand is failed like any other
                job = jobs.get(pk=pk)
            heads.announce(queue, head, job, using=using)
            settled.append(job)
        more = pending.exists()
    return LaneFailure(jobs=tuple(settled), more=more)
