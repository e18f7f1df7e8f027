"""Queue heads: what a queue shows, and the ``ready`` flags that follow from it.

Invariant (held while the queue's lock is held): a queued job is ``ready`` exactly when it
has a recorded cancellation, or it is its queue's head and nothing of its queue runs. The
head is the running job; else a job waiting to retry (it keeps its place); else the best
queued job by priority, then position. Delayed jobs not yet due are not in the order.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..domain.values import IDLE, QueueHead
from ..models import Job
from ..signals import queue_changed
from .dialects import dialect


def head_of(row: Sequence[object] | None) -> QueueHead:
    """The ``QueueHead`` of a HEAD row (rank, id, job_id, cancellation_id, ready, lane)."""
    return _head(tuple(row) if row is not None else None)


def _head(row: tuple[object, ...] | None) -> QueueHead:
    if row is None:
        return IDLE
    rank, _, job_id, cancellation_id, _, _ = row
    return QueueHead(
        state="running" if rank == 0 else "queued",
        job_id=str(job_id),
        cancellation_requested=cancellation_id is not None,
    )


def read(using: str, queue: str) -> QueueHead:
    """The head of ``queue`` as it stands; writes nothing."""
    d = dialect(using)
    rows = d.fetch(d.HEAD, {"queue": queue})
    return _head(rows[0] if rows else None)


def read_many(using: str, queues: Sequence[str]) -> dict[str, QueueHead]:
    """The head of each of ``queues`` as it stands, in one statement; writes nothing."""
    names = list(dict.fromkeys(queues))
    if not names:
        return {}
    d = dialect(using)
    found = d.fetch(*d.heads_statement(names))
    heads = dict.fromkeys(names, IDLE)
    for queue, *row in found:
        heads[queue] = _head(tuple(row))
    return heads


def refresh(using: str, queue: str, *, entered: Collection[int] = ()) -> QueueHead:
    """Recompute ``queue``'s head and make it ready (waking its lane's workers).

    ``entered`` are ids of jobs that just entered the queue's order: if one became the
    head, the head it displaced loses its ready flag. No other transition can leave a
    stale ready head behind. The caller holds the queue's lock.
    """
    return _head(dialect(using).refresh_head(queue, tuple(entered)))


def announce(
    queue: str, head: QueueHead | None, settled: Job | None = None, *, using: str = "default"
) -> None:
    """Send ``queue_changed`` inside the caller's transaction; a raising receiver aborts it.

    ``head`` may be ``None`` when the caller did not need it: it is read only if someone
    listens.
    """

    if not queue_changed.has_listeners(Job):
        return
    if head is None:
        head = read(using, queue)
    queue_changed.send(sender=Job, queue=queue, head=head, settled=settled)


def listening() -> bool:

    return queue_changed.has_listeners(Job)
