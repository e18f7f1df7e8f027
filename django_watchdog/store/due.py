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

from . import deadlocks, heads
from .dialects import dialect, lane_predicate

PROMOTE_BATCH = 256


@deadlocks.retried
def promote_due(using: str, *, now: datetime) -> int:
    """Move due delayed jobs into their queues' order, oldest due first; return how many.

    One transaction: positions are handed out in due order across queues. On PostgreSQL
    only queues it can lock at once take part (``SKIP LOCKED``); the others' jobs enter on
    a later call. SQLite's write transaction excludes every other writer.
    """
    d = dialect(using)
    at = d.param_datetime(now)
    if not d.fetch(d.ANY_DUE, {"now": at, "limit": PROMOTE_BATCH}):
        return 0
    entered: dict[str, list[int]] = defaultdict(list)
    with transaction.atomic(using=using):
        for pk, queue in d.due_delayed(at, PROMOTE_BATCH):
            if d.enter_order(pk):
                entered[queue].append(pk)
        for queue, ids in sorted(entered.items()):
            heads.announce(queue, heads.refresh(using, queue, entered=ids), using=using)
    return sum(len(ids) for ids in entered.values())


def next_due(using: str) -> datetime | None:
    """When the next delayed job or retry comes due, if any is waiting."""
    d = dialect(using)
    rows = d.fetch(d.NEXT_DUE)
    value = rows[0][0] if rows else None
    if isinstance(value, str):  # SQLite keeps datetimes as UTC text
        value = parse_datetime(value)
    if isinstance(value, datetime) and timezone.is_naive(value):  # UTC (SQLite, MariaDB)
        value = timezone.make_aware(value, UTC)
    return value if isinstance(value, datetime) else None


def retries_pending(using: str, lanes: Sequence[str], exclude_lanes: Sequence[str]) -> bool:
    predicate, params = lane_predicate("j.lane", lanes, exclude_lanes)
    d = dialect(using)
    return bool(d.fetch(d.retry_pending_sql(predicate), params))
