"""Retention: delete settled jobs older than an age, in batches, behind the feed horizon.

A settled job is deleted only once the settled feed has released it: it has a feed position
and that position is below the first pending job's (the *horizon*, which no feed reader of
any lane partition passes). Jobs the feed still holds back wait for a later prune.

Each batch is bounded in work, however many jobs the table holds: it reads the next
``batch_size`` settled jobs older than the age, oldest first, from where the previous batch
stopped (the ``watchdog_job_settled_at`` index), deletes those the feed released, and
positions at most ``batch_size`` new jobs in the feed. The walk ends at the age: the newer
settled jobs are never read, and nothing is counted up front.

A pruned job's id is free again (the idempotency window is the retention period) unless
``ID_RETENTION`` is set: then the delete records the ids it frees (``store.pruned_ids``),
and each pass forgets those whose ``ID_RETENTION`` has passed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import cast

from django.db import transaction
from django.db.models import Min

from ..domain.states import PENDING_STATES, State
from ..models import Job
from . import deadlocks, feed, pruned_ids
from .dialects import dialect

PRUNE_BATCH = 1_000


#: Where a prune's walk stands: the ``(settled_at, id)`` of the last job a batch read.
Place = tuple[datetime, int]


def prune_batches(
    using: str,
    *,
    older_than: timedelta,
    now: datetime,
    batch_size: int = PRUNE_BATCH,
    max_batches: int | None = None,
) -> Iterator[int]:
    """Delete jobs settled before ``now - older_than``; yield each batch's count (batches
    that found only jobs the feed holds back delete none and yield nothing).

    Each batch is one transaction that reads at most ``batch_size`` jobs; it stops when the
    walk reaches the age, or after ``max_batches``.
    """
    cutoff = now - older_than
    turns = _Turns(using)
    forgotten = 0
    while max_batches is None or forgotten < max_batches:
        forgotten += 1
        with turns.batch():
            forgot = pruned_ids.forget(using, now=now, batch_size=batch_size)
        if forgot < batch_size:
            break
    done = 0
    place: Place | None = None
    while max_batches is None or done < max_batches:
        with turns.batch():
            deleted, place = prune_batch(
                using, cutoff=cutoff, batch_size=batch_size, now=now, after=place
            )
        done += 1
        if deleted:
            yield deleted
        if place is None:
            return


class _Turns:
    """A run of write batches that lets other writers in between two of them
    (``Dialect.between_write_batches``): each batch after the first waits its turn."""

    def __init__(self, using: str) -> None:
        self.using = using
        self.held: float | None = None

    @contextmanager
    def batch(self) -> Iterator[None]:
        if self.held is not None:
            dialect(self.using).between_write_batches(self.held)
        started = time.monotonic()
        try:
            yield
        finally:
            self.held = time.monotonic() - started


def prune(
    using: str,
    *,
    older_than: timedelta,
    now: datetime,
    batch_size: int = PRUNE_BATCH,
    max_batches: int | None = None,
) -> int:
    """Run ``prune_batches`` to the end; return how many jobs were deleted."""
    batches = prune_batches(
        using, older_than=older_than, now=now, batch_size=batch_size, max_batches=max_batches
    )
    return sum(batches)


@deadlocks.retried
def prune_batch(
    using: str, *, cutoff: datetime, batch_size: int, now: datetime, after: Place | None = None
) -> tuple[int, Place | None]:
    """Read the next ``batch_size`` jobs settled before ``cutoff`` (oldest first, after
    ``after``) and delete those the feed released (recording their ids if ``ID_RETENTION``
    is set, ``now`` being when); how many, and where the next batch starts (``None``: the
    walk reached ``cutoff``)."""

    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        dialect(using).bound_lock_waits()
        # Position (a batch's worth of) what is visible first: old settled jobs need a
        # position to be released, and while this transaction holds the feed clock no
        # other one commits positions between the horizon's read and the walk's.
        feed.position_new_rows(using, limit=batch_size)
        horizon = jobs.filter(state__in=PENDING_STATES, feed_position__isnull=False).aggregate(
            first=Min("feed_position")
        )["first"]
        older = jobs.filter(state=State.SETTLED, settled_at__lt=cutoff)
        if after is not None:
            # The index range starts at the last one read; its ties up to it are skipped.
            older = older.filter(settled_at__gte=after[0]).exclude(
                settled_at=after[0], pk__lte=after[1]
            )
        read = list(
            older.order_by("settled_at", "pk").values_list("settled_at", "pk", "feed_position")[
                :batch_size
            ]
        )
        ids = [
            pk
            for _, pk, position in read
            if position is not None and (horizon is None or position < horizon)
        ]
        deleted = 0
        if ids:
            pruned_ids.remember(using, ids, now=now)
            deleted, _ = jobs.filter(pk__in=ids, state=State.SETTLED).delete()
    if len(read) < batch_size:
        return deleted, None
    last_settled_at, last_id, _ = read[-1]
    # Never NULL: the walk reads only jobs settled before the cutoff.
    return deleted, (cast(datetime, last_settled_at), last_id)
