"""The settled feed (SPEC §4.11): every settled job exactly once, in a stable order.

Jobs are read in *feed position* order. Positions are handed out by ``position_new_rows``
under the feed clock's row lock, only to rows the positioning transaction can see, so they
grow in commit order: a job whose enqueue commits late gets a later position instead of
being slipped in behind a reader's cursor. The feed never passes the first pending job of
the partition, so a cursor only ever moves over settled, positioned rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.db import transaction
from django.db.models import Min

from ..domain.states import PENDING_STATES, State
from ..domain.validation import encode_cursor
from ..domain.values import SettledRecord
from . import vendor

if TYPE_CHECKING:
    pass

POSITION_BATCH = 10_000

LOCK_CLOCK = "SELECT last_position FROM watchdog_feed_clock WHERE id = 1 FOR UPDATE"
READ_CLOCK = "SELECT last_position FROM watchdog_feed_clock WHERE id = 1"
CREATE_CLOCK = (
    "INSERT INTO watchdog_feed_clock (id, last_position) VALUES (1, 0) ON CONFLICT (id) DO NOTHING"
)
POSITION_ROWS = """
UPDATE watchdog_job
   SET feed_position = %s + fresh.rank
  FROM (SELECT id, row_number() OVER (ORDER BY id) AS rank
          FROM (SELECT id FROM watchdog_job
                 WHERE feed_position IS NULL AND delayed = <FALSE>
                 ORDER BY id
                 LIMIT {batch} {skip_locked}) AS unpositioned) AS fresh
 WHERE watchdog_job.id = fresh.id
"""
ANY_UNPOSITIONED = (
    "SELECT 1 FROM watchdog_job WHERE feed_position IS NULL AND delayed = <FALSE> LIMIT 1"
)
ADVANCE_CLOCK = "UPDATE watchdog_feed_clock SET last_position = last_position + %s WHERE id = 1"


def position_new_rows(using: str) -> int:
    """Give every visible, unpositioned job the next feed positions; return how many.

    With none visible the clock is left alone: a reader that positions nothing writes
    nothing, so its transaction commits without a log flush and never queues for the lock.
    """
    if not vendor.fetch(using, ANY_UNPOSITIONED):
        return 0
    postgres = vendor.is_postgres(using)
    clock = vendor.fetch(using, LOCK_CLOCK if postgres else READ_CLOCK)
    if not clock:
        vendor.execute(using, CREATE_CLOCK)
        clock = vendor.fetch(using, LOCK_CLOCK if postgres else READ_CLOCK)
    base = int(clock[0][0])
    # Rows another transaction holds locked are left for the next reader: they get a later
    # position, which is still after everything a reader could have passed.
    sql = POSITION_ROWS.format(
        batch=POSITION_BATCH, skip_locked="FOR UPDATE SKIP LOCKED" if postgres else ""
    )
    positioned = vendor.execute(using, sql, (base,))
    if positioned:
        vendor.execute(using, ADVANCE_CLOCK, (positioned,))
    return positioned


def settled_after(
    using: str,
    after: int,
    limit: int,
    *,
    lanes: Sequence[str] = (),
    exclude_lanes: Sequence[str] = (),
) -> list[SettledRecord]:
    """Settled jobs positioned after ``after``, up to the partition's first pending job."""
    from ..models import Job

    jobs = Job.objects.using(using)
    if lanes:
        jobs = jobs.filter(lane__in=lanes)
    if exclude_lanes:
        jobs = jobs.exclude(lane__in=exclude_lanes)
    with transaction.atomic(using=using):
        position_new_rows(using)
        horizon = jobs.filter(state__in=PENDING_STATES, feed_position__isnull=False).aggregate(
            first=Min("feed_position")
        )["first"]
        settled = jobs.filter(state=State.SETTLED, feed_position__gt=after)
        if horizon is not None:
            settled = settled.filter(feed_position__lt=horizon)
        rows = list(settled.order_by("feed_position")[:limit])
    return [SettledRecord(cursor=encode_cursor(job.feed_position or 0), job=job) for job in rows]
