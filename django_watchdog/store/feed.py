"""The settled feed (SPEC §4.11): every settled job exactly once, in a stable order.

Jobs are read in *feed position* order. Positions are handed out by ``position_new_rows``
under the feed clock's row lock, only to rows the positioning transaction can see, so they
grow in commit order: a job whose enqueue commits late gets a later position instead of
being slipped in behind a reader's cursor. The feed never passes the first pending job of
the partition, so a cursor only ever moves over settled, positioned rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from ..domain.validation import encode_cursor
from ..domain.values import SettledRecord
from . import rows, vendor
from .as_stored import reading_as_stored

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
    return _position(using)


def _position(using: str) -> int:
    """``position_new_rows`` once the probe found work: lock the clock and number the rows."""
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


#: The settled jobs after a cursor, up to the partition's first pending job (the horizon):
#: index range scans on the ``watchdog_job_feed_*`` partial indexes, whose predicates the
#: terms repeat. ``{lanes}`` narrows both to a partition.
SETTLED_AFTER = """
SELECT <COLUMNS> FROM watchdog_job
 WHERE state = 'settled' AND feed_position IS NOT NULL AND feed_position > %s {lanes}
   AND feed_position < COALESCE(
       (SELECT MIN(feed_position) FROM watchdog_job
         WHERE state IN ('queued', 'running') AND feed_position IS NOT NULL {lanes}),
       %s)
 ORDER BY feed_position
 LIMIT %s
"""
#: Above every feed position (a bigint): no pending job, no horizon.
NO_HORIZON = 2**63 - 1


def settled_after(
    using: str,
    after: int,
    limit: int,
    *,
    lanes: Sequence[str] = (),
    exclude_lanes: Sequence[str] = (),
) -> list[SettledRecord]:
    """Settled jobs positioned after ``after``, up to the partition's first pending job."""
    sql, params = settled_after_statement(after, limit, lanes, exclude_lanes)
    if vendor.fetch(using, ANY_UNPOSITIONED):
        with transaction.atomic(using=using):
            _position(using)
            found = vendor.fetch(using, sql, params)
    else:
        # Nothing to position (a quiet feed): the read is one statement, one snapshot, and
        # needs no transaction of its own.
        found = vendor.fetch(using, sql, params)
    records = []
    # A settled row that does not decode (edited by hand, quarantined) is still a settled
    # job the feed owes its reader, exactly once: it comes as stored.
    with reading_as_stored():
        for row in found:
            job = rows.to_job(using, row)
            records.append(SettledRecord(cursor=encode_cursor(job.feed_position or 0), job=job))
    return records


def settled_after_statement(
    after: int, limit: int, lanes: Sequence[str], exclude_lanes: Sequence[str]
) -> tuple[str, list[Any]]:
    """``SETTLED_AFTER`` for a partition (``AND lane IN (…)``, ``AND lane NOT IN (…)``, in
    the read and in its horizon) and its parameters."""
    terms: list[str] = []
    lane_params: list[Any] = []
    if lanes:
        terms.append(f"AND lane IN ({', '.join(['%s'] * len(lanes))})")
        lane_params += lanes
    if exclude_lanes:
        terms.append(f"AND lane NOT IN ({', '.join(['%s'] * len(exclude_lanes))})")
        lane_params += exclude_lanes
    sql = SETTLED_AFTER.format(lanes=" ".join(terms))
    return sql, [after, *lane_params, *lane_params, NO_HORIZON, limit]
