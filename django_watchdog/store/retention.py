"""Retention: delete settled jobs older than an age, in batches, behind the feed horizon.

A settled job is deleted only once the settled feed has released it: it has a feed position
and that position is below the first pending job's (the *horizon*, which no feed reader of
any lane partition passes). Jobs the feed still holds back wait for a later prune.

A pruned job's id is free again (the idempotency window is the retention period) unless
``ID_RETENTION`` is set: then the delete records the ids it frees (``store.pruned_ids``),
and each pass forgets those whose ``ID_RETENTION`` has passed.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Min

from ..domain.states import PENDING_STATES, State
from ..models import Job
from . import deadlocks, feed, pruned_ids
from .dialects import dialect

PRUNE_BATCH = 1_000


def prune_batches(
    using: str,
    *,
    older_than: timedelta,
    now: datetime,
    batch_size: int = PRUNE_BATCH,
    max_batches: int | None = None,
) -> Iterator[int]:
    """Delete jobs settled before ``now - older_than``; yield each batch's count.

    Each batch is one transaction of at most ``batch_size`` rows; it stops when a batch
    finds nothing more to delete, or after ``max_batches``.
    """
    cutoff = now - older_than
    forgotten = 0
    while max_batches is None or forgotten < max_batches:
        forgotten += 1
        if pruned_ids.forget(using, now=now, batch_size=batch_size) < batch_size:
            break
    done = 0
    while max_batches is None or done < max_batches:
        deleted = prune_batch(using, cutoff=cutoff, batch_size=batch_size, now=now)
        done += 1
        if not deleted:
            return
        yield deleted
        if deleted < batch_size:
            return


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
def prune_batch(using: str, *, cutoff: datetime, batch_size: int, now: datetime) -> int:
    """Delete up to ``batch_size`` released jobs settled before ``cutoff``, oldest feed first
    (recording their ids if ``ID_RETENTION`` is set, ``now`` being when)."""

    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        dialect(using).bound_lock_waits()
        # Position what is visible first, so the horizon covers every committed pending job.
        feed.position_new_rows(using)
        horizon = jobs.filter(state__in=PENDING_STATES, feed_position__isnull=False).aggregate(
            first=Min("feed_position")
        )["first"]
        released = jobs.filter(
            state=State.SETTLED, feed_position__isnull=False, settled_at__lt=cutoff
        )
        if horizon is not None:
            released = released.filter(feed_position__lt=horizon)
        ids = list(released.order_by("feed_position").values_list("pk", flat=True)[:batch_size])
        if not ids:
            return 0
        pruned_ids.remember(using, ids, now=now)
        deleted, _ = jobs.filter(pk__in=ids, state=State.SETTLED).delete()
    return deleted
