"""Work every worker does on the side of claiming: periodic schedules, retention, and
statistics for tables the database has none of.

A step that fails (a setting that overflows, a database error) is logged and backed off on
its own; it never raises into the worker's loop, so claiming, recovery and timeouts go on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from ..conf import age
from ..store.store import PRUNE_BATCH
from ..store.worker_store import LockBusy
from . import events
from .backoff import Backoff
from .clock import Clock
from .ports import HousekeepingStore
from .schedules import FireFunction, Schedule, Scheduler, database_fire

#: Seconds between a worker's retention passes (when ``WATCHDOG["RETENTION"]`` is set).
PRUNE_INTERVAL = 60.0
#: Batches one pass deletes at most, so pruning never holds up claiming for long.
PRUNE_BATCHES_PER_PASS = 5
#: Seconds between a worker's looks for watchdog's tables the database has no statistics of
#: (``store.statistics``), until none is left to wait for.
STATISTICS_INTERVAL = 10.0
#: Longest wait before a failing housekeeping step is tried again.
FAILED_STEP_BACKOFF_MAX = PRUNE_INTERVAL


def retention() -> timedelta | None:
    """``WATCHDOG["RETENTION"]`` as a ``timedelta`` (seconds or a timedelta), or ``None``;
    ``ImproperlyConfigured`` naming the setting if it is no age a cut-off can reach."""
    return age("RETENTION")


class Housekeeping:
    """Called from the worker's main loop; touches the database only when something is due.

    ``store`` is the worker's (its lock waits bounded); ``schedules`` are the periodic
    schedules to fire (the management command passes the configured ones), none by default.
    """

    def __init__(
        self,
        store: HousekeepingStore,
        clock: Clock,
        *,
        schedules: dict[str, Schedule] | None = None,
        fire: FireFunction | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.scheduler = Scheduler(schedules or {}, fire or database_fire(store))
        self._next_prune = 0.0
        self._next_statistics = 0.0
        #: Whether every table has statistics, or is one this worker may not analyze.
        self._statistics_settled = False
        self._refused: set[str] = set()
        #: Per step: its backoff, and the monotonic time before which it is not retried.
        self._failing: dict[str, tuple[Backoff, float]] = {}

    def run_due(self) -> None:
        """Enqueue due schedule ticks; prune settled jobs if retention is on and due;
        analyze the tables the database has no statistics of, if due.

        Never raises: a failing step is logged and skipped until its backoff has passed.
        """
        self._step("schedules", lambda: self.scheduler.run_due(self.clock.now()))
        self._step("retention", self._prune_if_due)
        self._step("statistics", self._analyze_if_due)

    def _analyze_if_due(self) -> None:
        """Every ``STATISTICS_INTERVAL`` until every table has statistics (or is refused):
        analyze those that have none once grown, and say so, as it means autovacuum has
        not looked at them (or is off)."""
        if self._statistics_settled or self.clock.monotonic() < self._next_statistics:
            return
        found = self.store.analyze_unanalyzed(skip=self._refused)
        if found.analyzed:
            events.log(
                logging.WARNING,
                "tables_analyzed",
                tables=",".join(found.analyzed),
                reason="no statistics: autovacuum has not analyzed them, or is off",
            )
        if found.refused:
            self._refused.update(found.refused)
            events.log(
                logging.WARNING,
                "analyze_refused",
                tables=",".join(found.refused),
                reason="no statistics, and this role may not analyze them: run ANALYZE",
            )
        self._statistics_settled = not found.waiting
        self._next_statistics = self.clock.monotonic() + STATISTICS_INTERVAL

    def _prune_if_due(self) -> None:
        age = retention()
        if age is not None and self.clock.monotonic() >= self._next_prune:
            self.prune(age)

    def _step(self, name: str, step: Callable[[], object]) -> None:
        backoff, resume_at = self._failing.get(name, (None, 0.0))
        if self.clock.monotonic() < resume_at:
            return
        try:
            step()
        except Exception as error:  # noqa: BLE001 - housekeeping must never stop claiming
            backoff = backoff or Backoff(start=1.0, most=FAILED_STEP_BACKOFF_MAX)
            delay = backoff.failed()
            self._failing[name] = (backoff, self.clock.monotonic() + delay)
            events.log(
                logging.ERROR,
                "housekeeping_failed",
                step=name,
                error=f"{type(error).__name__}: {error}",
                retry_in_s=delay,
            )
            logging.getLogger("django_watchdog.worker").debug(
                "housekeeping step %s failed", name, exc_info=True
            )
        else:
            self._failing.pop(name, None)

    def prune(self, age: timedelta) -> int:
        """Delete settled jobs older than ``age``, then the task queues left without a job."""
        try:
            deleted = self.store.prune(
                older_than=age, now=self.clock.now(), max_batches=PRUNE_BATCHES_PER_PASS
            )
            forgotten = self.store.forget_idle_task_queues()
        except LockBusy:
            # A lock held elsewhere (the feed clock, say): prune at the next interval.
            events.log(logging.WARNING, "prune_deferred", older_than_s=age.total_seconds())
            self._next_prune = self.clock.monotonic() + PRUNE_INTERVAL
            return 0
        if deleted or forgotten:
            events.log(
                logging.INFO,
                "prune",
                deleted=deleted,
                idle_task_queues=forgotten,
                older_than_s=age.total_seconds(),
            )
        # A full pass leaves more behind: go on at the next loop instead of in a minute.
        full = deleted >= PRUNE_BATCHES_PER_PASS * PRUNE_BATCH
        self._next_prune = self.clock.monotonic() + (0.0 if full else PRUNE_INTERVAL)
        return deleted
