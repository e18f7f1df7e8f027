"""Coalescing: find a queued job identical to a new one, so the new one need not be added.

``queued_twin`` locks the queue first (its row on PostgreSQL; SQLite's write transaction
excludes every other writer), then looks, so the twin it returns cannot be claimed before
the caller's transaction ends: a claim skips a locked queue. The twin therefore starts
after the caller's changes commit and reads them, which is what makes coalescing a call
that reads current state safe. A twin is queued, not delayed, not waiting to retry, not
cancelled, and has the new job's lane, priority, payload and recovery policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction

from ..domain import validation
from ..domain.states import State
from . import deadlocks
from .dialects import dialect

if TYPE_CHECKING:
    from ..models import Job
    from .enqueue import NewJob

#: Twins looked at per call: a queue holds few queued jobs when its calls coalesce.
TWIN_SCAN = 32


@deadlocks.retried
def queued_twin(using: str, new: NewJob) -> Job | None:
    """The oldest queued job that ``new`` would repeat, its queue locked; ``None`` if none.

    Must run inside the transaction that then enqueues ``new`` if there is no twin.
    """
    from ..models import Job

    if not transaction.get_connection(using).in_atomic_block:
        raise RuntimeError("queued_twin() needs the enqueueing transaction")
    dialect(using).lock_queue(new.queue)
    candidates = (
        Job.objects.using(using)
        .filter(
            queue=new.queue,
            state=State.QUEUED,
            lane=new.lane,
            priority=new.priority,
            delayed=False,
            retry_at__isnull=True,
            cancellation_id__isnull=True,
        )
        .order_by("id")[:TWIN_SCAN]
    )
    identity = new.payload_identity
    for job in candidates:
        if (
            job.max_recoveries == new.max_recoveries
            and job.retry_policy is None
            and job.timeout is None
            and validation.json_identity(job.payload) == identity
        ):
            return job
    return None
