"""The dashboard: one admin page of charts, throughput and failures, backlog, live workers.

Served by the job admin at ``<admin>/django_watchdog/job/dashboard/`` and linked from the
watchdog app's admin index. Staff with the view permission on jobs may see it. Its figures
come from ``ops.activity`` (a fixed number of bounded queries) and its charts from
``admin.charts`` (inline SVG rendered here: the page loads nothing from the network).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import django
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils import timezone
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from ..ops import activity
from ..ops.activity import Activity, Bucket
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
    hour_peak = max((b.total for lane in lanes for b in lane.hour), default=0)
    day_peak = max((b.total for lane in lanes for b in lane.day), default=0)
    backlog_peak = max((lane.queued + lane.running for lane in lanes), default=0)
    age_peak = max((lane.oldest_ready_age_s or 0.0 for lane in lanes), default=0.0)
    rows = []
    for lane in lanes:
        waiting = max(lane.queued - lane.ready, 0)
        oldest = display.duration(lane.oldest_ready_age_s)
        rows.append(
            LaneRow(
                lane=lane.lane,
                hour_chart=charts.throughput(
                    lane.hour,
                    step=snapshot.hour_step,
                    label=_("lane %(lane)s, last hour") % {"lane": lane.lane},
                    time_format="%H:%M",
                    peak=hour_peak,
                ),
                day_chart=charts.throughput(
                    lane.day,
                    step=snapshot.day_step,
                    label=_("lane %(lane)s, last day") % {"lane": lane.lane},
                    time_format="%H:%M",
                    peak=day_peak,
                ),
                hour=activity.total(lane.hour),
                day=activity.total(lane.day),
                queued=lane.queued,
                ready=lane.ready,
                running=lane.running,
                backlog_chart=charts.meter(
                    [
                        Meter(
                            value=lane.running,
                            colour=RUNNING_COLOUR,
                            text=f"{lane.running} running",
                        ),
                        Meter(value=lane.ready, colour=READY_COLOUR, text=f"{lane.ready} ready"),
                        Meter(value=waiting, colour=QUEUED_COLOUR, text=f"{waiting} waiting"),
                    ],
                    scale=backlog_peak,
                    label=_("lane %(lane)s backlog: %(queued)d queued, %(running)d running")
                    % {"lane": lane.lane, "queued": lane.queued, "running": lane.running},
                ),
                oldest_ready=oldest,
                oldest_chart=charts.meter(
                    [
                        Meter(
                            value=lane.oldest_ready_age_s or 0.0,
                            colour=AGE_COLOUR,
                            text=f"oldest ready job waiting {oldest}",
                        )
                    ],
                    scale=age_peak,
                    label=_("lane %(lane)s: oldest ready job waiting %(age)s")
                    % {"lane": lane.lane, "age": oldest},
                ),
                live_workers=lane.live_workers,
            )
        )
    workers = [
        WorkerRow(
            worker_id=w.worker_id,
            host=w.host,
            pid=w.pid,
            lanes=", ".join(w.lanes)
            or _("all lanes") + (f" (not {', '.join(w.exclude_lanes)})" if w.exclude_lanes else ""),
            running=w.running,
            concurrency=w.concurrency,
            load_chart=charts.meter(
                [Meter(value=w.running, colour=RUNNING_COLOUR, text=f"{w.running} running")],
                scale=w.concurrency,
                label=_("%(worker)s: %(running)d of %(slots)d slots busy")
                % {"worker": w.worker_id, "running": w.running, "slots": w.concurrency},
                width=120,
            ),
            heartbeat=display.duration(w.heartbeat_age_s),
        )
        for w in snapshot.workers
    ]
    totals = {
        name: charts.throughput(
            buckets,
            step=step,
            label=_("all lanes, last %(span)s") % {"span": name},
            time_format="%H:%M",
            width=480,
            height=96,
        )
        for name, buckets, step in (
            ("hour", snapshot.hour, snapshot.hour_step),
            ("day", snapshot.day, snapshot.day_step),
        )
    }
    return {
        "lane_rows": rows,
        "worker_rows": workers,
        "total_charts": totals,
        "hour_total": activity.total(snapshot.hour),
        "day_total": activity.total(snapshot.day),
    }
