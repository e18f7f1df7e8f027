"""``manage.py watchdog status``: lanes, queues, workers and counts, flat on big tables.

Every figure is an index probe, a count that stops at ``COUNT_CAP`` rows, or an estimate,
so the command answers as fast beside a million queued jobs as on empty tables:

- lanes with pending work and their queued and running jobs as ``pending.by_lane`` reads
  them: one index probe per lane, counts exact up to ``COUNT_CAP``, past it PostgreSQL and
  MariaDB give the planner's estimate (SQLite, on one machine, counts on);
- ready jobs (at most one per queue) are counted over the ``ready`` index, the oldest aged
  on the database's clock (which stamped it), as the dashboard does;
- queues listed are those running a job, then those whose head is ready, next to run first
  (their indexes), each with its queued jobs counted as the lanes' are;
- settled jobs, which may be millions, are never counted in full: PostgreSQL and MariaDB
  give the planner's estimate, SQLite an exact count capped at ``SETTLED_COUNT_CAP``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.models import QuerySet

from ..domain.states import State
from ..engine.housekeeping import retention
from ..store import estimates
from . import pending
from .activity import ready_by_lane
from .tables import ago, table
from .workers import WorkerRow, registered

if TYPE_CHECKING:
    from ..models import Job

SETTLED_COUNT_CAP = 100_000
#: Pending jobs (of a lane, a state, a queue) are counted exactly up to this many.
COUNT_CAP = pending.COUNT_CAP
#: Queues listed by name (running ones, then those next to run); the rest are only counted.
QUEUES_SHOWN = 20
#: Lanes with pending work listed at most.
LANES_SHOWN = pending.LANES_SHOWN
#: The orders of the indexes the queues' counts walk (``head``, ``queue_delayed``).
HEAD_ORDER = ("-priority", "position")
DELAYED_ORDER = ("queue", "run_after")


@dataclass(frozen=True, kw_only=True)
class LaneRow:
    lane: str
    queued: int = 0
    running: int = 0
    ready: int = 0
    oldest_ready_age_s: float | None = None
    workers: list[str] = field(default_factory=list)
    counts_exact: bool = True


@dataclass(frozen=True, kw_only=True)
class QueueRow:
    queue: str
    queued: int
    running: int
    queued_exact: bool = True


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
    pending_count_exact: bool
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
    """Read the snapshot with bounded queries: index probes, capped counts, estimates."""
    from ..models import Job

    jobs = Job.objects.using(using).order_by()
    ready, oldest_age_s = ready_by_lane(jobs)
    lanes = pending.by_lane(jobs, cap=COUNT_CAP, lanes=LANES_SHOWN)
    counts: dict[str, int] = {
        State.QUEUED.value: sum(lane.queued for lane in lanes.values()),
        State.RUNNING.value: sum(lane.running for lane in lanes.values()),
    }
    settled, settled_exact = _settled_count(jobs.filter(state=State.SETTLED))
    counts[State.SETTLED.value] = settled

    workers = registered(using)
    queue_rows, queues_with_work = _queues(jobs)
    connection = connections[using]
    return Status(
        database=using,
        vendor=connection.vendor,
        at=now.isoformat(),
        counts=counts,
        pending_count_exact=all(lane.exact for lane in lanes.values()),
        settled_count_exact=settled_exact,
        oldest_ready_age_s=max(oldest_age_s.values(), default=None),
        lanes=[
            LaneRow(
                lane=lane,
                queued=values.queued,
                running=values.running,
                ready=ready.get(lane, 0),
                oldest_ready_age_s=oldest_age_s.get(lane),
                workers=[w.worker_id for w in workers if w.alive and w.serves(lane)],
                counts_exact=values.exact,
            )
            for lane, values in sorted(lanes.items())
        ],
        queues=queue_rows,
        queues_with_work=queues_with_work,
        workers=workers,
        schedules=_schedules(using, now),
        retention_s=None if retention() is None else retention().total_seconds(),  # type: ignore[union-attr]
    )


def _queues(jobs: QuerySet[Job]) -> tuple[list[QueueRow], int]:
    """Up to ``QUEUES_SHOWN`` queues in play: those running a job (by name), then those
    whose head is ready (next to run first), with their queued jobs; and how many queues
    run or have a ready job (counted up to ``COUNT_CAP``, estimated past it)."""
    running = jobs.filter(state=State.RUNNING)
    ready = jobs.filter(state=State.QUEUED, ready=True)
    names = list(running.order_by("queue").values_list("queue", flat=True)[:QUEUES_SHOWN])
    busy = set(names)
    for name in ready.order_by("-priority", "position").values_list("queue", flat=True)[
        : QUEUES_SHOWN + len(busy)
    ]:
        if len(names) < QUEUES_SHOWN and name not in names:
            names.append(name)
    rows = []
    for name in names:
        # Waiting jobs (the queue-order index).
        # Past the cap, a lower bound: the planner cannot estimate one queue's state well
        # (it takes queue and state as independent), so "10000+" says more than a guess.
        waiting = estimates.bounded_count(
            jobs.filter(queue=name, state=State.QUEUED, delayed=False), COUNT_CAP, HEAD_ORDER
        )
        # Delayed ones (the queue's delayed index), up to the cap as well.
        delayed = estimates.bounded_count(
            jobs.filter(queue=name, state=State.QUEUED, delayed=True), COUNT_CAP, DELAYED_ORDER
        )
        rows.append(
            QueueRow(
                queue=name,
                queued=min(waiting, COUNT_CAP) + min(delayed, COUNT_CAP),
                running=int(name in busy),
                queued_exact=waiting <= COUNT_CAP and delayed <= COUNT_CAP,
            )
        )
    in_play = sum(
        estimates.count_or_estimate(part, COUNT_CAP, order)[0]
        for part, order in ((running, ("claimed_by",)), (ready, ("queue",)))
    )
    return rows, in_play


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
    about = "" if status.pending_count_exact else "~"
    parts = [
        f"watchdog on {status.database} ({status.vendor}) at {status.at}",
        f"jobs: {about}{status.counts['queued']} queued, {status.counts['running']} running, "
        f"{settled} settled; oldest ready job waiting {ago(status.oldest_ready_age_s)}; "
        f"retention: {retention_text}",
        "",
        "LANES",
        table(
            ("lane", "queued", "running", "ready", "oldest ready", "live workers"),
            [
                (
                    lane.lane,
                    lane.queued if lane.counts_exact else f"~{lane.queued}",
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
        f"QUEUES (running or ready: {status.queues_with_work}"
        + (f", {len(status.queues)} shown" if status.queues_with_work > len(status.queues) else "")
        + ")",
        table(
            ("queue", "queued", "running"),
            [
                (q.queue, q.queued if q.queued_exact else f"{q.queued}+", q.running)
                for q in status.queues
            ],
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
