"""Periodic schedules: which cron ticks are due, and enqueueing each tick once.

A tick's job id is derived from the schedule name and the tick time, so every worker may try
to enqueue it and idempotent enqueue keeps one. The store keeps, per schedule, the instant up
to which ticks have been handled (``handled_until``) under a row lock, so workers rarely even
try twice; the job id is what makes a tick run once even if they do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from ..domain import validation
from ..domain.errors import InvalidInput
from ..store.waits import LockBusy
from . import events

if TYPE_CHECKING:
    from .ports import HousekeepingStore

#: How soon a schedule whose lock was held elsewhere (``LockBusy``) is tried again.
BUSY_RETRY = timedelta(seconds=5)

Missed = Literal["latest", "all", "skip"]
MISSED_POLICIES: tuple[Missed, ...] = ("latest", "all", "skip")
#: ``missed="all"`` enqueues at most this many ticks after a downtime (the most recent ones).
MISSED_LIMIT = 100
#: ``missed="skip"``: a tick later than this (seconds) when first seen counts as missed.
DEFAULT_GRACE = 60.0
JOB_ID_PREFIX = "schedule:"
MAX_NAME_LENGTH = 200
_TICK_TEXT_LENGTH = len("2026-12-01T03:00:00+00:00")
_JUST_AFTER = timedelta(microseconds=1)


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """One validated periodic schedule; build it with ``Schedule.parse``."""

    name: str
    cron: str
    queue: str
    lane: str
    priority: int
    payload: Any
    max_recoveries: int | None
    missed: Missed
    grace: float
    timezone: str

    @classmethod
    def parse(
        cls,
        name: object,
        *,
        cron: object,
        queue: object = None,
        lane: object = "default",
        priority: object = 0,
        payload: object = None,
        max_recoveries: object = None,
        missed: object = "latest",
        grace: object = DEFAULT_GRACE,
        timezone: object = "UTC",
    ) -> Schedule:
        """Validate every option; raise ``InvalidInput`` naming the first bad one."""
        name = validation.identifier(name, "name")
        if len(name) > MAX_NAME_LENGTH:
            raise InvalidInput("name", f"must be at most {MAX_NAME_LENGTH} characters")
        if not isinstance(cron, str) or not croniter.is_valid(cron, hash_id=name):
            raise InvalidInput(
                "cron",
                f"{cron!r} is not a cron expression (5 fields, or 6 with seconds last)",
            )
        if missed not in MISSED_POLICIES:
            raise InvalidInput("missed", f"must be one of {', '.join(MISSED_POLICIES)}")
        if isinstance(grace, bool) or not isinstance(grace, int | float) or not grace > 0:
            raise InvalidInput("grace", "must be a positive number of seconds")
        if not isinstance(timezone, str):
            raise InvalidInput("timezone", "must be an IANA time zone name such as 'UTC'")
        try:
            ZoneInfo(timezone)
        except (ZoneInfoNotFoundError, ValueError) as error:
            raise InvalidInput("timezone", f"{timezone!r} is not a known time zone") from error
        validation.canonical_json(payload, "payload")
        return cls(
            name=name,
            cron=cron,
            queue=validation.identifier(JOB_ID_PREFIX + name if queue is None else queue, "queue"),
            lane=validation.lane(lane),
            priority=validation.priority(priority),
            payload=payload,
            max_recoveries=validation.max_recoveries(max_recoveries),
            missed=missed,  # checked against MISSED_POLICIES above
            grace=float(grace),
            timezone=timezone,
        )

    @property
    def zone(self) -> tzinfo:
        return ZoneInfo(self.timezone)

    def job_id(self, tick: datetime) -> str:
        """The job id of ``tick``: ``schedule:<name>:<tick in UTC, ISO 8601>``."""
        return f"{JOB_ID_PREFIX}{self.name}:{tick.astimezone(UTC).isoformat()}"

    def next_tick(self, after: datetime) -> datetime:
        """The first tick strictly after ``after``."""
        ticks = croniter(self.cron, after.astimezone(self.zone), hash_id=self.name)
        return _utc(ticks.get_next(datetime))

    def recent_ticks(self, now: datetime, *, after: datetime, limit: int) -> list[datetime]:
        """Up to ``limit`` ticks in ``(after, now]``, the most recent ones, oldest first."""
        ticks = croniter(self.cron, (now + _JUST_AFTER).astimezone(self.zone), hash_id=self.name)
        found: list[datetime] = []
        while len(found) < limit:
            tick = _utc(ticks.get_prev(datetime))
            if tick <= after:
                break
            found.append(tick)
        return found[::-1]

    def due(self, now: datetime, handled_until: datetime | None) -> list[datetime]:
        """The ticks to enqueue now, given every tick up to ``handled_until`` was handled.

        A schedule seen for the first time (``None``) starts now: nothing is backfilled.
        After a gap, ``missed`` decides: ``latest`` the most recent due tick only, ``all``
        every due tick (at most ``MISSED_LIMIT``, the most recent), ``skip`` the most recent
        one only if it is at most ``grace`` seconds old.
        """
        if handled_until is None or handled_until >= now:
            return []
        if self.missed == "all":
            return self.recent_ticks(now, after=handled_until, limit=MISSED_LIMIT)
        latest = self.recent_ticks(now, after=handled_until, limit=1)
        if self.missed == "skip" and latest and (now - latest[0]).total_seconds() > self.grace:
            return []
        return latest


def tick_of(job_id: str) -> datetime | None:
    """The tick a schedule's job id stands for, or ``None`` for any other job id."""
    if not job_id.startswith(JOB_ID_PREFIX) or len(job_id) <= len(JOB_ID_PREFIX) + 26:
        return None
    try:
        return datetime.fromisoformat(job_id[-_TICK_TEXT_LENGTH:])
    except ValueError:
        return None


def _utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


@dataclass(frozen=True, kw_only=True)
class Fired:
    """What one pass over a due schedule did."""

    schedule: str
    enqueued: tuple[str, ...] = ()  # job ids newly queued
    duplicates: tuple[str, ...] = ()  # job ids another worker had already queued
    conflicts: tuple[str, ...] = ()  # job ids taken by a job with different fields
    handled_until: datetime | None = None


#: Lock the schedule's state, call ``plan(handled_until)`` for the ticks to enqueue, enqueue
#: them and record the new ``handled_until``, all in one transaction (``store.schedules.fire``).
FireFunction = Callable[[Schedule, datetime], Fired]


class Scheduler:
    """Enqueue due ticks from a worker's main loop, touching the database only when due."""

    def __init__(self, schedules: Mapping[str, Schedule], fire: FireFunction) -> None:
        self.schedules = dict(schedules)
        self.fire = fire
        self._next_due: dict[str, datetime] = {}

    def run_due(self, now: datetime) -> list[Fired]:
        """Fire every schedule whose next tick (as this worker last saw it) has come."""
        fired = []
        for name, schedule in self.schedules.items():
            due_at = self._next_due.get(name)
            if due_at is not None and now < due_at:
                continue
            try:
                result = self.fire(schedule, now)
            except LockBusy:
                # Another transaction holds its row or queue: the others go on, it is
                # tried again after a short while (its due ticks are kept, not lost).
                self._next_due[name] = now + BUSY_RETRY
                events.log(logging.WARNING, "schedule_deferred", schedule=name)
                continue
            self._next_due[name] = schedule.next_tick(max(now, result.handled_until or now))
            _log(result)
            fired.append(result)
        return fired


def _log(result: Fired) -> None:
    events.log(
        logging.DEBUG,
        "schedule_fire",
        schedule=result.schedule,
        enqueued=len(result.enqueued),
        duplicates=len(result.duplicates),
        handled_until=result.handled_until.isoformat() if result.handled_until else None,
    )
    for job_id in result.enqueued:
        events.log(logging.INFO, "schedule_enqueue", schedule=result.schedule, job_id=job_id)
    for job_id in result.conflicts:
        events.log(
            logging.ERROR,
            "schedule_conflict",
            schedule=result.schedule,
            job_id=job_id,
            why="a job with this id exists with other fields; tick not enqueued",
        )


def database_fire(store: HousekeepingStore) -> FireFunction:
    """The ``FireFunction`` that enqueues through ``store`` (``Store.fire_schedule``)."""
    from ..store.enqueue import NewJob

    def fire(schedule: Schedule, now: datetime) -> Fired:
        def new_job(tick: datetime) -> NewJob:
            return NewJob.parse(
                schedule.job_id(tick),
                queue=schedule.queue,
                lane=schedule.lane,
                priority=schedule.priority,
                payload=schedule.payload,
                max_recoveries=schedule.max_recoveries,
            )

        outcomes, handled_until = store.fire_schedule(
            schedule.name,
            now=now,
            due=lambda handled: schedule.due(now, handled),
            new_job=new_job,
        )
        by_status: dict[str, list[str]] = {"queued": [], "duplicate": [], "conflict": []}
        for job_id, status in outcomes:
            by_status[status].append(job_id)
        return Fired(
            schedule=schedule.name,
            enqueued=tuple(by_status["queued"]),
            duplicates=tuple(by_status["duplicate"]),
            conflicts=tuple(by_status["conflict"]),
            handled_until=handled_until,
        )

    return fire
