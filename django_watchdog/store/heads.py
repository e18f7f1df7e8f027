"""Queue heads: what a queue shows, and the ``ready`` flags that follow from it.

Invariant (held while the queue's lock is held): a queued job is ``ready`` exactly when it
has a recorded cancellation, or no job of its queue runs and no queued job outranks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..domain.states import State
from ..domain.values import IDLE, QueueHead
from ..signals import queue_changed

if TYPE_CHECKING:
    from ..models import Job


def refresh(using: str, queue: str, *, demote: bool = False) -> tuple[QueueHead, str | None]:
    """Recompute ``queue``'s head and mark it ready; return it and the lane to wake, if any.

    ``demote`` clears a previous head that a newly enqueued job now outranks; other
    transitions cannot leave a stale ready head behind.
    """
    from ..models import Job

    jobs = Job.objects.using(using)
    running = (
        jobs.filter(queue=queue, state=State.RUNNING)
        .values_list("job_id", "cancellation_id")
        .first()
    )
    if running is not None:
        return QueueHead(
            state="running", job_id=running[0], cancellation_requested=running[1] is not None
        ), None
    best = (
        jobs.filter(queue=queue, state=State.QUEUED)
        .order_by("-priority", "id")
        .values_list("pk", "job_id", "cancellation_id", "ready", "lane")
        .first()
    )
    if best is None:
        return IDLE, None
    pk, job_id, cancellation_id, ready, lane = best
    if demote:
        jobs.filter(queue=queue, ready=True, cancellation_id__isnull=True).exclude(pk=pk).update(
            ready=False
        )
    wake = None
    if not ready:
        jobs.filter(pk=pk).update(ready=True)
        wake = lane
    return QueueHead(
        state="queued", job_id=job_id, cancellation_requested=cancellation_id is not None
    ), wake


def read(using: str, queue: str) -> QueueHead:
    """The head of ``queue`` as it stands; writes nothing."""
    from ..models import Job

    jobs = Job.objects.using(using)
    row = (
        jobs.filter(queue=queue, state=State.RUNNING)
        .values_list("job_id", "cancellation_id")
        .first()
    )
    if row is not None:
        return QueueHead(state="running", job_id=row[0], cancellation_requested=row[1] is not None)
    row = (
        jobs.filter(queue=queue, state=State.QUEUED)
        .order_by("-priority", "id")
        .values_list("job_id", "cancellation_id")
        .first()
    )
    if row is None:
        return IDLE
    return QueueHead(state="queued", job_id=row[0], cancellation_requested=row[1] is not None)


def announce(queue: str, head: QueueHead, settled: Job | None = None) -> None:
    """Send ``queue_changed`` inside the caller's transaction; a raising receiver aborts it."""
    from ..models import Job

    if queue_changed.has_listeners(Job):
        queue_changed.send(sender=Job, queue=queue, head=head, settled=settled)
