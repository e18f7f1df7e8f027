"""Queue heads: what a queue shows, and the ``ready`` flags that follow from it.

Invariant (held while the queue's lock is held): a queued job is ``ready`` exactly when it
has a recorded cancellation, or it is its queue's head and nothing of its queue runs. The
head is the running job; else a job waiting to retry (it keeps its place); else the best
queued job by priority, then position. Delayed jobs not yet due are not in the order.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any

from ..domain.values import IDLE, QueueHead
from ..signals import queue_changed
from . import vendor

if TYPE_CHECKING:
    from ..models import Job

HEAD = """
SELECT rank, id, job_id, cancellation_id, ready, lane FROM (
    SELECT 0 AS rank, id, job_id, cancellation_id, ready, lane
      FROM watchdog_job WHERE queue = %s AND state = 'running' {not_settling}
    UNION ALL
    SELECT * FROM (
        SELECT 1 AS rank, id, job_id, cancellation_id, ready, lane
          FROM watchdog_job WHERE queue = %s AND state = 'queued' AND retry_at IS NOT NULL
         LIMIT 1) AS retrying
    UNION ALL
    SELECT * FROM (
        SELECT 2 AS rank, id, job_id, cancellation_id, ready, lane
          FROM watchdog_job WHERE queue = %s AND state = 'queued' AND delayed = <FALSE>
         ORDER BY priority DESC, position ASC
         LIMIT 1) AS best
) AS candidates
ORDER BY rank
LIMIT 1
"""
#: The id of ``{queue}``'s head if nothing of it runs (a SQL expression, for statements
#: that settle several queues' heads at once): its job waiting to retry, else its best
#: queued job. ``{queue}`` is the column or parameter naming the queue.
NEXT_HEAD = """COALESCE(
               (SELECT r.id FROM watchdog_job r
                 WHERE r.queue = {queue} AND r.state = 'queued' AND r.retry_at IS NOT NULL
                 LIMIT 1),
               (SELECT b.id FROM watchdog_job b
                 WHERE b.queue = {queue} AND b.state = 'queued' AND b.delayed = <FALSE>
                 ORDER BY b.priority DESC, b.position ASC
                 LIMIT 1))"""
#: PostgreSQL: the head, its ready flag and the displaced head's, in one round trip.
#: ``{head}`` is HEAD; ``{only_if}`` lets the settle statement make it conditional.
REFRESH_POSTGRES = """
WITH head AS ({head}),
marked AS (
    UPDATE watchdog_job SET ready = TRUE FROM head
     WHERE watchdog_job.id = head.id AND head.rank <> 0 AND NOT watchdog_job.ready {only_if}
    RETURNING CASE WHEN watchdog_job.lane = ANY(%s::text[]) THEN NULL
                   ELSE pg_notify(%s, watchdog_job.lane) END
),
demoted AS (
    UPDATE watchdog_job SET ready = FALSE FROM head
     WHERE watchdog_job.queue = %s AND watchdog_job.ready AND watchdog_job.cancellation_id IS NULL
       AND watchdog_job.id <> head.id AND head.rank <> 0 AND head.id = ANY(%s::bigint[])
    RETURNING 1
)
"""
MARK_READY = "UPDATE watchdog_job SET ready = TRUE WHERE id = %s AND NOT ready"
DEMOTE = """
UPDATE watchdog_job SET ready = FALSE
 WHERE queue = %s AND ready = <TRUE> AND cancellation_id IS NULL AND id <> %s
"""


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
    rows = vendor.fetch(using, HEAD.format(not_settling=""), (queue, queue, queue))
    return _head(rows[0] if rows else None)


def refresh(using: str, queue: str, *, entered: Collection[int] = ()) -> QueueHead:
    """Recompute ``queue``'s head and make it ready (waking its lane's workers).

    ``entered`` are ids of jobs that just entered the queue's order: if one became the
    head, the head it displaced loses its ready flag. No other transition can leave a
    stale ready head behind. The caller holds the queue's lock.
    """
    if vendor.is_postgres(using):
        from ..conf import setting

        sql = REFRESH_POSTGRES.format(head=HEAD.format(not_settling=""), only_if="")
        params: tuple[Any, ...] = (
            queue,
            queue,
            queue,
            [],
            setting("NOTIFY_CHANNEL"),
            queue,
            list(entered),
        )
        rows = vendor.fetch(using, sql + "SELECT * FROM head", params)
        return _head(rows[0] if rows else None)
    rows = vendor.fetch(using, HEAD.format(not_settling=""), (queue, queue, queue))
    if not rows:
        return IDLE
    row = rows[0]
    rank, pk, _, _, ready, _ = row
    if rank != 0:
        if pk in entered:
            vendor.execute(using, DEMOTE, (queue, pk))
        if not ready:
            vendor.execute(using, MARK_READY, (pk,))
    return _head(row)


def announce(
    queue: str, head: QueueHead | None, settled: Job | None = None, *, using: str = "default"
) -> None:
    """Send ``queue_changed`` inside the caller's transaction; a raising receiver aborts it.

    ``head`` may be ``None`` when the caller did not need it: it is read only if someone
    listens.
    """
    from ..models import Job

    if not queue_changed.has_listeners(Job):
        return
    if head is None:
        head = read(using, queue)
    queue_changed.send(sender=Job, queue=queue, head=head, settled=settled)


def listening() -> bool:
    from ..models import Job

    return queue_changed.has_listeners(Job)
