"""The dashboard: one admin page of charts, throughput and failures, backlog, live workers.

Served by the job admin at ``<admin>/django_watchdog/job/dashboard/`` and linked from the
watchdog app's admin index. Staff with the view permission on jobs may see it. Its figures
come from ``ops.activity`` (a fixed number of bounded queries) and its charts from
``admin.charts`` (inline SVG rendered here: the page loads nothing from the network).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import django
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from ..domain.states import State
from ..ops import activity
from ..ops.activity import Activity, Bucket, LaneActivity
from ..ops.workers import WorkerRow as LiveWorker
from . import charts, display
from .charts import Meter

if TYPE_CHECKING:
    from .base import ReadOnlyAdmin

    _AdminBase = ReadOnlyAdmin
else:
    _AdminBase = object

#: The dashboard's URL name in the admin's namespace: ``reverse("admin:" + URL_NAME)``.
URL_NAME = "django_watchdog_dashboard"
TEMPLATE = "admin/django_watchdog/dashboard.html"
QUEUED_COLOUR, READY_COLOUR, RUNNING_COLOUR, AGE_COLOUR = "#90caf9", "#1e88e5", "#fb8c00", "#8e24aa"


@dataclass(frozen=True, kw_only=True)
class LaneRow:
    """One lane of the dashboard's table: figures and their charts."""

    lane: str
    hour_chart: SafeString
    day_chart: SafeString
    hour: Bucket
    day: Bucket
    queued: int
    ready: int
    running: int
    #: ``queued`` and ``running`` as text: ``~12000`` estimated, ``10000+`` at least.
    queued_shown: str
    running_shown: str
    backlog_chart: SafeString
    oldest_ready: str
    oldest_chart: SafeString
    live_workers: int


@dataclass(frozen=True, kw_only=True)
class WorkerRow:
    worker_id: str
    host: str
    pid: int
    lanes: str
    running: int
    concurrency: int
    load_chart: SafeString
    heartbeat: str


class DashboardMixin(_AdminBase):
    """Adds the dashboard page to a model admin's URLs (the job admin's)."""

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.dashboard_view)
        return [path("dashboard/", view, name=URL_NAME), *super().get_urls()]

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        """The page; 403 for staff without the view permission on jobs."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        using = self.get_queryset(request).db
        snapshot = activity.collect(using, now=timezone.now())
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": _("Watchdog dashboard"),
            "opts": self.opts,
            "app_label": self.opts.app_label,
            "snapshot": snapshot,
            "breadcrumbs_as_list": django.VERSION >= (6, 0),
            "scan_jobs": activity.SCAN_JOBS,
            "workers_shown": activity.WORKERS_SHOWN,
            **charts_for(snapshot),
        }
        return TemplateResponse(request, TEMPLATE, context)


def charts_for(snapshot: Activity) -> dict[str, Any]:
    """The dashboard's charts and rows; lanes share one scale per chart so they compare."""
    lanes = snapshot.lanes
    scales = _Scales(
        hour=max((b.total for lane in lanes for b in lane.hour), default=0),
        day=max((b.total for lane in lanes for b in lane.day), default=0),
        backlog=max((lane.queued + lane.running for lane in lanes), default=0),
        age=max((lane.oldest_ready_age_s or 0.0 for lane in lanes), default=0.0),
    )
    return {
        "lane_rows": [_lane_row(lane, snapshot, scales) for lane in lanes],
        "worker_rows": [_worker_row(worker) for worker in snapshot.workers],
        "total_charts": {
            "hour": _big(snapshot.hour, snapshot.hour_step, _("all lanes, last hour")),
            "day": _big(snapshot.day, snapshot.day_step, _("all lanes, last day")),
        },
        "hour_total": activity.total(snapshot.hour),
        "day_total": activity.total(snapshot.day),
    }


@dataclass(frozen=True, kw_only=True)
class _Scales:
    """What the full height or width of each lane chart stands for: the busiest lane's."""

    hour: int
    day: int
    backlog: int
    age: float


def _lane_row(lane: LaneActivity, snapshot: Activity, scales: _Scales) -> LaneRow:
    names = {"lane": lane.lane}
    waiting = max(lane.queued - lane.ready, 0)
    oldest = display.duration(lane.oldest_ready_age_s)
    shown = {
        state: lane.pending.shown(state) if lane.pending else str(count)
        for state, count in ((State.QUEUED, lane.queued), (State.RUNNING, lane.running))
    }
    return LaneRow(
        lane=lane.lane,
        hour_chart=charts.throughput(
            lane.hour,
            step=snapshot.hour_step,
            label=_("lane %(lane)s, last hour") % names,
            time_format="%H:%M",
            peak=scales.hour,
        ),
        day_chart=charts.throughput(
            lane.day,
            step=snapshot.day_step,
            label=_("lane %(lane)s, last day") % names,
            time_format="%H:%M",
            peak=scales.day,
        ),
        hour=activity.total(lane.hour),
        day=activity.total(lane.day),
        queued=lane.queued,
        ready=lane.ready,
        running=lane.running,
        queued_shown=shown[State.QUEUED],
        running_shown=shown[State.RUNNING],
        backlog_chart=charts.meter(
            [
                Meter(value=lane.running, colour=RUNNING_COLOUR, text=_running(lane.running)),
                Meter(
                    value=lane.ready,
                    colour=READY_COLOUR,
                    text=_("%(n)d ready") % {"n": lane.ready},
                ),
                Meter(
                    value=waiting, colour=QUEUED_COLOUR, text=_("%(n)d waiting") % {"n": waiting}
                ),
            ],
            scale=scales.backlog,
            label=_("lane %(lane)s backlog: %(queued)s queued, %(running)s running")
            % {**names, "queued": shown[State.QUEUED], "running": shown[State.RUNNING]},
        ),
        oldest_ready=oldest,
        oldest_chart=charts.meter(
            [
                Meter(
                    value=lane.oldest_ready_age_s or 0.0,
                    colour=AGE_COLOUR,
                    text=_("oldest ready job waiting %(age)s") % {"age": oldest},
                )
            ],
            scale=scales.age,
            label=_("lane %(lane)s: oldest ready job waiting %(age)s") % {**names, "age": oldest},
        ),
        live_workers=lane.live_workers,
    )


def _worker_row(worker: LiveWorker) -> WorkerRow:
    if worker.lanes:
        lanes = ", ".join(worker.lanes)
    elif worker.exclude_lanes:
        lanes = _("all lanes but %(lanes)s") % {"lanes": ", ".join(worker.exclude_lanes)}
    else:
        lanes = _("all lanes")
    return WorkerRow(
        worker_id=worker.worker_id,
        host=worker.host,
        pid=worker.pid,
        lanes=lanes,
        running=worker.running,
        concurrency=worker.concurrency,
        load_chart=charts.meter(
            [Meter(value=worker.running, colour=RUNNING_COLOUR, text=_running(worker.running))],
            scale=worker.concurrency,
            label=_("%(worker)s: %(running)d of %(slots)d slots busy")
            % {"worker": worker.worker_id, "running": worker.running, "slots": worker.concurrency},
            width=120,
        ),
        heartbeat=display.duration(worker.heartbeat_age_s),
    )


def _big(buckets: list[Bucket], step: timedelta, label: str) -> SafeString:
    return charts.throughput(
        buckets, step=step, label=label, time_format="%H:%M", width=480, height=96
    )


def _running(n: int) -> str:
    return _("%(n)d running") % {"n": n}
