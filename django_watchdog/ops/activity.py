"""What the admin dashboard shows: throughput, failures, backlog and live workers, by lane.

Every figure comes from a fixed number of bounded queries, whatever the table holds:

- Throughput counts the settled jobs of the last day among the newest ``SCAN_JOBS`` jobs by
  primary key (a range scan of the primary key, never the whole table; ``settled_at`` has no
  index of its own). A job enqueued before that window but settled inside it is not counted;
  ``Activity.scan_cut`` says when the window left older jobs out.
- Backlog: the lanes with pending jobs one index probe each, each lane's queued and running
  jobs counted up to ``pending.COUNT_CAP`` (``pending.by_lane``: past it the planner's
  estimate, or on SQLite the cap, shown as a lower bound), never a count of every pending
  job; the oldest ready job over the ready rows (at most one per queue, plus queued jobs
  with a recorded cancellation), its age on the database's clock.
- Workers are the live ones (``engine.liveness.alive``, as ``watchdog status`` and recovery
  judge them), their running jobs counted
  over the running rows (``watchdog_job_running``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from django.db.models import Count, Min, QuerySet
from django.db.models.functions import TruncHour, TruncMinute
from django.db.models.functions.datetime import TruncBase

from ..domain.states import Outcome, State
from ..store.clock import SecondsSince
from . import pending
from .pending import LanePending
from .workers import WorkerRow, registered

if TYPE_CHECKING:
    from ..models import Job

#: How many of the newest jobs (by primary key) the throughput charts read at most.
SCAN_JOBS = 100_000
#: Live workers listed by name (the busiest first); the rest are only counted.
WORKERS_SHOWN = 50
#: The hour in 12 buckets of 5 minutes, the day in 24 buckets of an hour (oldest first).
HOUR_BUCKETS, HOUR_STEP = 12, timedelta(minutes=5)
DAY_BUCKETS, DAY_STEP = 24, timedelta(hours=1)


@dataclass(frozen=True, kw_only=True)
class Bucket:
    """Jobs settled in ``[start, start + step)``: completed, failed and cancelled."""

    start: datetime
    completed: int = 0
    failed: int = 0
    cancelled: int = 0

    @property
    def total(self) -> int:
        return self.completed + self.failed + self.cancelled


@dataclass(frozen=True, kw_only=True)
class LaneActivity:
    """One lane: its settled jobs per bucket over the hour and the day, and its backlog."""

    lane: str
    hour: list[Bucket]
    day: list[Bucket]
    queued: int = 0
    running: int = 0
    ready: int = 0
    oldest_ready_age_s: float | None = None
    live_workers: int = 0
    #: ``queued`` and ``running`` as counted, with their marks past the cap.
    pending: LanePending | None = None


@dataclass(frozen=True, kw_only=True)
class Activity:
    """A snapshot for the dashboard, read at ``at``; ``hour`` and ``day`` sum all lanes."""

    at: datetime
    hour: list[Bucket]
    day: list[Bucket]
    lanes: list[LaneActivity]
    workers: list[WorkerRow]
    live_workers: int
    scan_cut: bool
    scanned_from_id: int
    hour_step: timedelta = HOUR_STEP
    day_step: timedelta = DAY_STEP


def total(buckets: Sequence[Bucket]) -> Bucket:
    """The sum of ``buckets``, starting where the first starts."""
    return Bucket(
        start=buckets[0].start,
        completed=sum(b.completed for b in buckets),
        failed=sum(b.failed for b in buckets),
        cancelled=sum(b.cancelled for b in buckets),
    )


def collect(using: str, *, now: datetime) -> Activity:
    """Read the dashboard's figures with eight queries and three per lane with pending jobs
    (a probe, two capped counts), however many jobs and workers."""
    from ..models import Job

    jobs = Job.objects.using(using).order_by()
    ends = id_range(jobs)
    first_id = max(1, (ends["last"] or 0) - SCAN_JOBS + 1)
    hour_start = _floor(now, HOUR_STEP) - HOUR_STEP * (HOUR_BUCKETS - 1)
    day_start = _floor(now, DAY_STEP) - DAY_STEP * (DAY_BUCKETS - 1)
    recent = jobs.filter(pk__gte=first_id, state=State.SETTLED)
    hour = _settled_by_lane(recent, since=hour_start, trunc=TruncMinute("settled_at", tzinfo=UTC))
    day = _settled_by_lane(recent, since=day_start, trunc=TruncHour("settled_at", tzinfo=UTC))
    pending_counts = pending.by_lane(jobs, count_on=False)
    backlog, oldest = backlog_by_lane(jobs, pending_counts)
    workers = live_workers(using)
    lanes = [
        LaneActivity(
            lane=lane,
            hour=_buckets(hour[lane], hour_start, HOUR_STEP, HOUR_BUCKETS),
            day=_buckets(day[lane], day_start, DAY_STEP, DAY_BUCKETS),
            queued=backlog[lane].get(State.QUEUED.value, 0),
            running=backlog[lane].get(State.RUNNING.value, 0),
            ready=backlog[lane].get("ready", 0),
            pending=pending_counts.get(lane),
            oldest_ready_age_s=oldest.get(lane),
            live_workers=sum(1 for w in workers if w.serves(lane)),
        )
        for lane in sorted(set(hour) | set(day) | set(backlog))
    ]
    return Activity(
        at=now,
        hour=_all_lanes([lane.hour for lane in lanes], hour_start, HOUR_STEP, HOUR_BUCKETS),
        day=_all_lanes([lane.day for lane in lanes], day_start, DAY_STEP, DAY_BUCKETS),
        lanes=lanes,
        workers=workers[:WORKERS_SHOWN],
        live_workers=len(workers),
        # Cut only when older jobs were left out, wherever the id sequence stands.
        scan_cut=ends["first"] is not None and ends["first"] < first_id,
        scanned_from_id=first_id,
    )


#: lane -> bucket start (minute or hour) -> outcome -> jobs settled.
_Settled = dict[str, dict[datetime, dict[str, int]]]


def _settled_by_lane(recent: QuerySet[Job], *, since: datetime, trunc: TruncBase) -> _Settled:
    """One GROUP BY over ``recent`` settled since ``since``, by lane, ``trunc`` and outcome."""
    found: _Settled = defaultdict(dict)
    rows = (
        recent.filter(settled_at__gte=since)
        .annotate(at=trunc)
        .values("lane", "outcome", "at")
        .annotate(n=Count("pk"))
        .values_list("lane", "outcome", "at", "n")
    )
    for lane, outcome, at, n in rows:
        slot = found[lane].setdefault(at, {})
        slot[str(outcome)] = slot.get(str(outcome), 0) + n
    return found


def backlog_by_lane(
    jobs: QuerySet[Job], counted: dict[str, LanePending] | None = None
) -> tuple[dict[str, dict[str, int]], dict[str, float]]:
    """Per lane, queued / running / ready counts (``counted``, else ``pending.by_lane``),
    and how long its oldest ready job has waited, in seconds on the database's clock (the
    one that stamped ``enqueued_at``), so a host clock that differs from the database's
    adds or removes nothing."""
    backlog: dict[str, dict[str, int]] = defaultdict(dict)
    if counted is None:
        counted = pending.by_lane(jobs)
    for lane, counts in counted.items():
        backlog[lane] = {State.QUEUED.value: counts.queued, State.RUNNING.value: counts.running}
    ready, oldest_age_s = ready_by_lane(jobs)
    for lane, n in ready.items():
        backlog[lane]["ready"] = n
    return backlog, oldest_age_s


def ready_by_lane(jobs: QuerySet[Job]) -> tuple[dict[str, int], dict[str, float]]:
    """Per lane, its ready jobs (at most one per queue, plus queued jobs with a recorded
    cancellation: the ``ready`` partial index) and how long the oldest has waited, in
    seconds on the database's clock."""
    ready: dict[str, int] = {}
    oldest_age_s: dict[str, float] = {}
    for lane, n, waited_s in (
        jobs.filter(state=State.QUEUED, ready=True)
        .values("lane")
        .annotate(n=Count("pk"), waited_s=SecondsSince(Min("enqueued_at")))
        .values_list("lane", "n", "waited_s")
    ):
        ready[lane] = n
        oldest_age_s[lane] = max(0.0, waited_s)
    return ready, oldest_age_s


def id_range(jobs: QuerySet[Job]) -> dict[str, int | None]:
    """The lowest (``first``) and highest (``last``) job id, each read off an end of the
    primary key (SQLite scans a whole index for ``MIN`` and ``MAX`` in one query)."""
    ids = jobs.order_by().values_list("pk", flat=True)
    return {"first": ids.order_by("pk").first(), "last": ids.order_by("-pk").first()}


def live_workers(using: str) -> list[WorkerRow]:
    """The live workers, the busiest first."""
    live = [w for w in registered(using) if w.alive]
    return sorted(live, key=lambda w: (-w.running, w.worker_id))


def _floor(moment: datetime, step: timedelta) -> datetime:
    """The start of the ``step``-long bucket holding ``moment`` (in UTC)."""
    moment = moment.astimezone(UTC)
    seconds = int(step.total_seconds())
    epoch = int(moment.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=UTC)


def _buckets(
    counts: dict[datetime, dict[str, int]], start: datetime, step: timedelta, n: int
) -> list[Bucket]:
    """``n`` buckets from ``start``; ``counts`` is keyed by minute or hour, summed in."""
    sums = [{"completed": 0, "failed": 0, "cancelled": 0} for _ in range(n)]
    for at, outcomes in counts.items():
        index = int((at.astimezone(UTC) - start) / step)
        if not 0 <= index < n:
            continue
        for outcome, count in outcomes.items():
            sums[index][_kind(outcome)] += count
    return [Bucket(start=start + step * i, **sums[i]) for i in range(n)]


def _all_lanes(
    per_lane: list[list[Bucket]], start: datetime, step: timedelta, n: int
) -> list[Bucket]:
    """Bucket by bucket, the sum over lanes (which share their bucket starts)."""
    return [
        total([lane[i] for lane in per_lane]) if per_lane else Bucket(start=start + step * i)
        for i in range(n)
    ]


def _kind(outcome: str) -> str:
    if outcome == Outcome.COMPLETED:
        return "completed"
    if outcome == Outcome.CANCELLED:
        return "cancelled"
    return "failed"
