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

from ..domain.as_stored import reading_as_stored
from ..domain.validation import encode_cursor
from ..domain.values import SettledRecord
from . import deadlocks, rows
from .dialects import dialect, in_clause

POSITION_BATCH = 10_000


def position_new_rows(using: str, *, limit: int = POSITION_BATCH) -> int:
    """Give up to ``limit`` visible, unpositioned jobs the next feed positions (the oldest
    first); return how many.

    With none visible the clock is left alone: a reader that positions nothing writes
    nothing, so its transaction commits without a log flush and never queues for the lock.
    """
    d = dialect(using)
    if not d.fetch(d.ANY_UNPOSITIONED):
        return 0
    return _position(using, limit)


def _position(using: str, limit: int = POSITION_BATCH) -> int:
    """``position_new_rows`` once the probe found work: lock the clock and number the rows."""
    d = dialect(using)
    clock = d.feed_clock()
    if not clock:
        d.execute(d.CREATE_CLOCK)
        clock = d.feed_clock()
    base = int(clock[0][0])
    positioned = d.position_rows(base, limit)
    if positioned:
        d.execute(d.ADVANCE_CLOCK, {"positioned": positioned})
    return positioned


#: Above every feed position (a bigint): no pending job, no horizon.
NO_HORIZON = 2**63 - 1


@deadlocks.retried
def settled_jobs(
    using: str,
    after: int,
    limit: int,
    *,
    lanes: Sequence[str] = (),
    exclude_lanes: Sequence[str] = (),
) -> list[SettledRecord]:
    """Settled jobs positioned after ``after``, up to the partition's first pending job."""
    sql, params = settled_jobs_statement(using, after, limit, lanes, exclude_lanes)
    d = dialect(using)
    if d.fetch(d.ANY_UNPOSITIONED):
        with transaction.atomic(using=using):
            _position(using)
            found = d.fetch(sql, params)
    else:
        # Nothing to position (a quiet feed): the read is one statement, one snapshot, and
        # needs no transaction of its own.
        found = d.fetch(sql, params)
    records = []
    # A settled row that does not decode (edited by hand, quarantined) is still a settled
    # job the feed owes its reader, exactly once: it comes as stored.
    with reading_as_stored():
        for row in found:
            job = rows.to_job(using, row)
            records.append(SettledRecord(cursor=encode_cursor(job.feed_position or 0), job=job))
    return records


def settled_jobs_statement(
    using: str, after: int, limit: int, lanes: Sequence[str], exclude_lanes: Sequence[str]
) -> tuple[str, dict[str, Any]]:
    """The feed read for a partition (``AND lane IN (…)``, ``AND lane NOT IN (…)``, in the
    read and in its horizon) and its parameters."""
    terms: list[str] = []
    params: dict[str, Any] = {"after": after, "no_horizon": NO_HORIZON, "limit": limit}
    if lanes:
        clause, bound = in_clause("lane", "lane", lanes)
        terms.append(f"AND {clause}")
        params.update(bound)
    if exclude_lanes:
        clause, bound = in_clause("lane", "exclude_lane", exclude_lanes, negate=True)
        terms.append(f"AND {clause}")
        params.update(bound)
    return dialect(using).settled_jobs_sql(" ".join(terms)), params
