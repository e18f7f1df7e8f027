"""``manage.py watchdog status``: lanes, queues, workers and counts, cheap on big tables.

Pending work is counted exactly with GROUP BY over the pending rows (their partial indexes),
the oldest ready job aged on the database's clock (which stamped it), as the dashboard does;
settled jobs, which may be millions, are never counted in full: PostgreSQL gives the
planner's estimate, other databases an exact count capped at ``SETTLED_COUNT_CAP``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import Count, Q

from ..domain.states import PENDING_STATES, State
from ..engine.housekeeping import retention
from ..store import estimates
from .activity import backlog_by_lane
from .tables import ago, table
from .workers import WorkerRow, registered

SETTLED_COUNT_CAP = 100_000
#: Queues listed by name (the busiest first); the rest are only counted.
QUEUES_SHOWN = 20


@dataclass(frozen=True, kw_only=True)
class LaneRow:
    lane: str
    queued: int = 0
    running: int = 0
    ready: int = 0
    oldest_ready_age_s: float | None = None
    workers: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class QueueRow:
    queue: str
    queued: int
    running: int


@dataclass(frozen=True, kw_only=True)
class ScheduleRow:
    name: str
    cron: str
    lane: str
    queue: str
    missed: str
    last_tick: str | None
    next_tick: str | None
    configured: bool


@dataclass(frozen=True, kw_only=True)
class Status:
    """A snapshot of the job tables; ``as_json()`` is what ``status --json`` prints."""

    database: str
    vendor: str
    at: str
    counts: dict[str, int]
    settled_count_exact: bool
    oldest_ready_age_s: float | None
    lanes: list[LaneRow]
    queues: list[QueueRow]
    queues_with_work: int
    workers: list[WorkerRow]
    schedules: list[ScheduleRow]
    retention_s: float | None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def collect(using: str, *, now: datetime) -> Status:
    """Read the snapshot with a handful of bounded queries."""
    from ..models import Job

    jobs = Job.objects.using(using).order_by()
    pending = jobs.filter(state__in=PENDING_STATES)
    lanes, oldest_age_s = backlog_by_lane(jobs)
    counts = {
        state: sum(by_state.get(state, 0) for by_state in lanes.values())
        for state in (State.QUEUED.value, State.RUNNING.value)
    }
    settled, exact = _settled_count(jobs.filter(state=State.SETTLED))
    counts[State.SETTLED.value] = settled

    workers = registered(using)
    queue_rows = (
        pending.values("queue")
        .annotate(
            queued=Count("pk", filter=Q(state=State.QUEUED)),
            running=Count("pk", filter=Q(state=State.RUNNING)),
        )
        .order_by("-running", "-queued", "queue")
    )
    connection = connections[using]
    return Status(
        database=using,
        vendor=connection.vendor,
        at=now.isoformat(),
        counts=counts,
        settled_count_exact=exact,
        oldest_ready_age_s=max(oldest_age_s.values(), default=None),
        lanes=[
            LaneRow(
                lane=lane,
                queued=values.get(State.QUEUED.value, 0),
                running=values.get(State.RUNNING.value, 0),
                ready=values.get("ready", 0),
                oldest_ready_age_s=oldest_age_s.get(lane),
                workers=[w.worker_id for w in workers if w.alive and w.serves(lane)],
            )
            for lane, values in sorted(lanes.items())
        ],
        queues=[QueueRow(**row) for row in queue_rows[:QUEUES_SHOWN]],
        queues_with_work=pending.values("queue").distinct().count(),
        workers=workers,
        schedules=_schedules(using, now),
        retention_s=None if retention() is None else retention().total_seconds(),  # type: ignore[union-attr]
    )


def _settled_count(settled: Any) -> tuple[int, bool]:
    estimate = estimates.planner_estimate(settled)
    if estimate is not None:
        return estimate, False
    count = estimates.bounded_count(settled, SETTLED_COUNT_CAP)
    return min(count, SETTLED_COUNT_CAP), count <= SETTLED_COUNT_CAP


def _schedules(using: str, now: datetime) -> list[ScheduleRow]:
    from ..schedules import load
    from ..store.store import Store

    schedules, _ = load()
    saved = Store(using).schedule_states()
    rows = []
    for name in sorted(set(schedules) | set(saved)):
        schedule = schedules.get(name)
        state = saved.get(name)
        last = state.last_tick if state is not None else None
        upcoming = None
        if schedule is not None:
            upcoming = schedule.next_tick(max(now, state.handled_until) if state else now)
        rows.append(
            ScheduleRow(
                name=name,
                cron=schedule.cron if schedule else "",
                lane=schedule.lane if schedule else "",
                queue=schedule.queue if schedule else "",
                missed=schedule.missed if schedule else "",
                last_tick=last.isoformat() if last else None,
                next_tick=upcoming.isoformat() if upcoming else None,
                configured=schedule is not None,
            )
        )
    return rows


def render(status: Status) -> str:
    """The snapshot as readable text tables."""
    settled = f"{status.counts['settled']}"
    if not status.settled_count_exact:
        estimated = status.vendor in ("postgresql", "mysql")  # the planner's estimate
        settled = f"~{settled}" if estimated else f"{SETTLED_COUNT_CAP}+"
    retention_text = "keep forever" if status.retention_s is None else ago(status.retention_s)
    parts = [
        f"watchdog on {status.database} ({status.vendor}) at {status.at}",
        f"jobs: {status.counts['queued']} queued, {status.counts['running']} running, "
        f"{settled} settled; oldest ready job waiting {ago(status.oldest_ready_age_s)}; "
        f"retention: {retention_text}",
        "",
        "LANES",
        table(
            ("lane", "queued", "running", "ready", "oldest ready", "live workers"),
            [
                (
                    lane.lane,
                    lane.queued,
                    lane.running,
                    lane.ready,
                    ago(lane.oldest_ready_age_s),
                    ", ".join(lane.workers) or "NONE",
                )
                for lane in status.lanes
            ],
            empty="no pending jobs",
        ),
        "",
        f"QUEUES (with pending work: {status.queues_with_work}"
        + (
            f", busiest {len(status.queues)} shown"
            if status.queues_with_work > len(status.queues)
            else ""
        )
        + ")",
        table(
            ("queue", "queued", "running"),
            [(q.queue, q.queued, q.running) for q in status.queues],
            empty="no pending jobs",
        ),
        "",
        "WORKERS",
        table(
            ("worker", "host:pid", "lanes", "running", "heartbeat", "state"),
            [
                (
                    w.worker_id,
                    f"{w.host}:{w.pid}",
                    _lanes_text(w),
                    f"{w.running}/{w.concurrency}",
                    f"{ago(w.heartbeat_age_s)} ago",
                    "alive" if w.alive else "SILENT",
                )
                for w in status.workers
            ],
            empty="no registered workers",
        ),
    ]
    if status.schedules:
        parts += [
            "",
            "SCHEDULES",
            table(
                ("schedule", "cron", "lane", "queue", "missed", "last tick", "next tick"),
                [
                    (
                        s.name,
                        s.cron or "(no longer configured)",
                        s.lane,
                        s.queue,
                        s.missed,
                        s.last_tick or "-",
                        s.next_tick or "-",
                    )
                    for s in status.schedules
                ],
            ),
        ]
    return "\n".join(parts)


def _lanes_text(worker: WorkerRow) -> str:
    text = ", ".join(worker.lanes) or "all"
    if worker.exclude_lanes:
        text += f" (not {', '.join(worker.exclude_lanes)})"
    return text
