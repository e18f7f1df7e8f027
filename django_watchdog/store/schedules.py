"""Schedule state: enqueue a schedule's due ticks once, under the schedule row's lock."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.db import transaction

from ..domain.errors import JobConflict
from ..models import ScheduleState
from . import deadlocks
from .dialects import dialect
from .enqueue import NewJob
from .enqueue import enqueue as enqueue_job


@deadlocks.retried
def fire(
    using: str,
    name: str,
    *,
    now: datetime,
    due: Callable[[datetime], Sequence[datetime]],
    new_job: Callable[[datetime], NewJob],
) -> tuple[list[tuple[str, str]], datetime]:
    """Enqueue the ticks ``due(handled_until)`` names, then record ``now`` as handled.

    One transaction; the schedule's row lock (PostgreSQL, MariaDB) or the write lock
    (SQLite) makes concurrent workers take turns, and the second sees the first's
    ``handled_until``.
    Returns ``(job_id, "queued" | "duplicate" | "conflict")`` per tick, and the new
    ``handled_until``.
    """

    states = ScheduleState.objects.using(using)
    with transaction.atomic(using=using):
        dialect(using).bound_lock_waits()
        state = states.select_for_update().filter(name=name).first()
        if state is None:
            # Only the schedule's first firing creates its row. Locking first keeps the
            # common case free of InnoDB's duplicate check, whose shared lock, upgraded by
            # the lock that follows, deadlocks two workers firing at once.
            states.bulk_create(
                [ScheduleState(name=name, handled_until=now, updated_at=now)],
                ignore_conflicts=True,
            )
            state = states.select_for_update().get(name=name)
        # A row created just now has handled_until == now: nothing is due, no backfill.
        ticks = due(state.handled_until)
        outcomes: list[tuple[str, str]] = []
        for tick in ticks:
            job = new_job(tick)
            try:
                with transaction.atomic(using=using):
                    outcomes.append((job.job_id, enqueue_job(using, job).status))
            except JobConflict:
                outcomes.append((job.job_id, "conflict"))
        changes: dict[str, Any] = {"updated_at": now}
        if now > state.handled_until:
            changes["handled_until"] = now
        if ticks and (state.last_tick is None or ticks[-1] > state.last_tick):
            changes["last_tick"] = ticks[-1]
        states.filter(name=name).update(**changes)
        return outcomes, max(now, state.handled_until)


def states(using: str) -> dict[str, ScheduleState]:
    """Every schedule's state row, by name."""

    return {state.name: state for state in ScheduleState.objects.using(using)}
