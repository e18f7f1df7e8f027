"""Time-driven changes: delayed jobs entering their queue's order, and the next due time.

A delayed job (``run_after`` in the future) is outside its queue's order until due. Then it
takes the next value of the job id sequence as its ``position``: it joins the order as if
enqueued at that moment, behind everything enqueued before.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from . import heads, vendor

PROMOTE_BATCH = 256

DUE_DELAYED = """
SELECT id, queue FROM watchdog_job WHERE delayed = <TRUE> AND run_after <= %s
 ORDER BY run_after, id LIMIT %s
"""
#: PostgreSQL, in the promoting transaction: the due jobs whose queues it could lock now.
#: A queue another transaction holds (a worker stopped inside it, say) is skipped and its
#: jobs enter on a later pass; the ``LIMIT`` counts only jobs of queues it locked. Waiting
#: for no lock, this cannot deadlock with multi-queue changes that lock in name order.
DUE_DELAYED_LOCKED_POSTGRES = """
SELECT j.id, j.queue FROM watchdog_job j JOIN watchdog_queue q ON q.name = j.queue
 WHERE j.delayed = <TRUE> AND j.run_after <= %s
 ORDER BY j.run_after, j.id LIMIT %s
   FOR UPDATE OF q SKIP LOCKED
"""
POSITION_POSTGRES = """
UPDATE watchdog_job SET delayed = FALSE,
       position = nextval(pg_get_serial_sequence('watchdog_job', 'id'))
 WHERE id = %s AND delayed
"""
NEXT_ID_SQLITE = (
    "UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'watchdog_job' RETURNING seq"
)
POSITION_SQLITE = "UPDATE watchdog_job SET delayed = FALSE, position = %s WHERE id = %s AND delayed"
NEXT_DUE = """
SELECT MIN(due) FROM (
    SELECT MIN(run_after) AS due FROM watchdog_job WHERE delayed = <TRUE>
    UNION ALL
    SELECT MIN(retry_at) FROM watchdog_job WHERE state = 'queued' AND retry_at IS NOT NULL
) AS soonest
"""


def promote_due(using: str, *, now: datetime) -> int:
    """Move due delayed jobs into their queues' order, oldest due first; return how many.

    One transaction: positions are handed out in due order across queues. On PostgreSQL
    only queues it can lock at once take part (``SKIP LOCKED``); the others' jobs enter on
    a later call. SQLite's write transaction excludes every other writer.
    """
    at = vendor.param_datetime(using, now)
    if not vendor.fetch(using, DUE_DELAYED, (at, PROMOTE_BATCH)):
        return 0
    entered: dict[str, list[int]] = defaultdict(list)
    with transaction.atomic(using=using):
        if vendor.is_postgres(using):
            vendor.bound_lock_waits(using)
            due = vendor.fetch(using, DUE_DELAYED_LOCKED_POSTGRES, (at, PROMOTE_BATCH))
        else:
            due = vendor.fetch(using, DUE_DELAYED, (at, PROMOTE_BATCH))
        for pk, queue in due:
            if vendor.is_postgres(using):
                changed = vendor.execute(using, POSITION_POSTGRES, (pk,))
            else:
                position = vendor.fetch(using, NEXT_ID_SQLITE)[0][0]
                changed = vendor.execute(using, POSITION_SQLITE, (position, pk))
            if changed:
                entered[queue].append(pk)
        for queue, ids in sorted(entered.items()):
            heads.announce(queue, heads.refresh(using, queue, entered=ids), using=using)
    return sum(len(ids) for ids in entered.values())


def next_due(using: str) -> datetime | None:
    """When the next delayed job or retry comes due, if any is waiting."""
    rows = vendor.fetch(using, NEXT_DUE)
    value = rows[0][0] if rows else None
    if isinstance(value, str):  # SQLite keeps datetimes as UTC text
        value = parse_datetime(value)
        if value is not None and timezone.is_naive(value):
            value = timezone.make_aware(value, UTC)
    return value if isinstance(value, datetime) else None


RETRY_PENDING = """
SELECT 1 FROM watchdog_job j
 WHERE j.state = 'queued' AND j.retry_at IS NOT NULL AND {lanes}
 LIMIT 1
"""


def retries_pending(using: str, lanes: Sequence[str], exclude_lanes: Sequence[str]) -> bool:
    predicate, params = vendor.lane_predicate("j.lane", lanes, exclude_lanes)
    return bool(vendor.fetch(using, RETRY_PENDING.format(lanes=predicate), params))
