"""The queue's figures for metrics, read from the database: the same from every process.

Every figure comes from a fixed number of bounded queries, however many settled jobs the
table holds (the dashboard's bounds, ``ops.activity``):

- queued / running counts by lane: GROUP BY over the pending rows only (the partial index
  ``watchdog_job_lane_pending``); ready counts and the oldest ready job over the ready rows
  (at most one per queue, plus queued jobs with a recorded cancellation);
- live workers: the registered workers judged as recovery judges them (``ops.workers``);
- settled counts by lane and outcome: jobs settled in the last ``SETTLED_WINDOW`` among the
  newest ``activity.SCAN_JOBS`` jobs by primary key (a range scan of the primary key, never
  the whole table). ``MetricsSnapshot.scan_cut`` says when older jobs were left out of
  that range.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Count

from ..domain.states import State
from . import activity
from .workers import registered as registered_workers

#: Settled jobs are counted over this trailing window.
SETTLED_WINDOW = timedelta(minutes=5)


@dataclass(frozen=True, kw_only=True)
class LaneFigures:
    """One lane's backlog and the live workers that serve it."""

    lane: str
    queued: int = 0
    ready: int = 0
    running: int = 0
    #: Seconds since the oldest ready job was enqueued; ``None`` when none is ready.
    oldest_ready_age_s: float | None = None
    live_workers: int = 0
    #: outcome -> jobs of this lane settled within ``SETTLED_WINDOW``.
    settled: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class MetricsSnapshot:
    """The figures read at ``at``; ``lanes`` sorted by name."""

    at: datetime
    lanes: list[LaneFigures]
    live_workers: int
    settled_window: timedelta
    scan_cut: bool


def read(using: str, *, now: datetime) -> MetricsSnapshot:
    """Read the figures with seven queries and three per lane with pending jobs, whatever
    the table holds.

    A lane is listed when it has pending jobs, jobs settled within the window, or a
    registered worker naming it, so "no live worker serves lane X" reads as 0.
    """
    from ..models import Job

    jobs = Job.objects.using(using).order_by()
    ends = activity.id_range(jobs)
    first_id = max(1, (ends["last"] or 0) - activity.SCAN_JOBS + 1)
    settled: dict[str, dict[str, int]] = {}
    for lane, outcome, n in (
        jobs.filter(pk__gte=first_id, state=State.SETTLED, settled_at__gte=now - SETTLED_WINDOW)
        .values("lane", "outcome")
        .annotate(n=Count("pk"))
        .values_list("lane", "outcome", "n")
    ):
        settled.setdefault(lane, {})[str(outcome)] = n
    backlog, oldest = activity.backlog_by_lane(jobs)
    registered = registered_workers(using)
    workers = [w for w in registered if w.alive]
    named = {lane for w in registered for lane in w.lanes}
    lanes = [
        LaneFigures(
            lane=lane,
            queued=backlog.get(lane, {}).get(State.QUEUED.value, 0),
            ready=backlog.get(lane, {}).get("ready", 0),
            running=backlog.get(lane, {}).get(State.RUNNING.value, 0),
            oldest_ready_age_s=oldest.get(lane),
            live_workers=sum(1 for w in workers if w.serves(lane)),
            settled=settled.get(lane, {}),
        )
        for lane in sorted(set(backlog) | set(settled) | named)
    ]
    return MetricsSnapshot(
        at=now,
        lanes=lanes,
        live_workers=len(workers),
        settled_window=SETTLED_WINDOW,
        scan_cut=ends["first"] is not None and ends["first"] < first_id,
    )
