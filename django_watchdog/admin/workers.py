"""The workers admin: who is alive, when each last beat, which lanes it serves, what it runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..conf import seconds
from ..domain.states import State
from ..engine import liveness
from ..models import Job, Worker
from ..store import clock
from . import display
from .base import PAGE_INFO, ReadOnlyAdmin, page_info


def timeout() -> float:
    return seconds("WORKER_TIMEOUT")


def alive_since() -> clock.DatabaseClock:
    """Workers whose last heartbeat is newer than this are alive (``WORKER_TIMEOUT``, on the
    database's clock, which stamps heartbeats). The filter goes by heartbeats alone; the
    ``alive`` column also asks this host about its own workers' processes."""
    return clock.DatabaseClock(timeout())


class AliveFilter(admin.SimpleListFilter):
    title = gettext_lazy("alive")
    parameter_name = "alive"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", _("alive")), ("no", _("gone"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Worker]) -> QuerySet[Worker]:
        if self.value() == "yes":
            return queryset.filter(heartbeat_at__gte=alive_since())
        if self.value() == "no":
            return queryset.filter(heartbeat_at__lt=alive_since())
        return queryset


@admin.register(Worker)
class WorkerAdmin(ReadOnlyAdmin):
    list_display = (
        "worker_id",
        "host",
        "pid",
        "alive",
        "heartbeat_age",
        "lanes_display",
        "concurrency",
        "running_jobs",
        "started_at",
    )
    list_filter = (AliveFilter,)
    search_fields = ("worker_id", "host")
    ordering = ("-heartbeat_at",)
    fields = (
        "worker_id",
        "host",
        "pid",
        "alive",
        "heartbeat_at",
        "heartbeat_age",
        "lanes_display",
        "concurrency",
        "running_jobs",
        "started_at",
    )

    def annotate_page(self, rows: Sequence[Any]) -> None:
        """How many jobs each shown worker holds, from the running-jobs index."""
        ids = [row.worker_id for row in rows]
        db = rows[0]._state.db if rows else None
        running = dict(
            Job.objects.using(db)
            .filter(state=State.RUNNING, claimed_by__in=ids)
            .order_by()
            .values("claimed_by")
            .annotate(n=Count("id"))
            .values_list("claimed_by", "n")
        )
        for row in rows:
            alive = liveness.alive(
                row.host, row.pid, row.started_at, silent_s=_silent_s(row), timeout=timeout()
            )
            setattr(row, PAGE_INFO, {"running": running.get(row.worker_id, 0), "alive": alive})

    def get_queryset(self, request: HttpRequest) -> QuerySet[Worker]:
        """Each row with ``silent_s``: its heartbeat's age on the database's clock."""
        queryset: QuerySet[Worker] = super().get_queryset(request)
        return queryset.annotate(silent_s=clock.SecondsSince("heartbeat_at"))

    @admin.display(description=gettext_lazy("alive"), boolean=True)
    def alive(self, worker: Worker) -> bool:
        return bool(page_info(worker, self)["alive"])

    @admin.display(description=gettext_lazy("last heartbeat"))
    def heartbeat_age(self, worker: Worker) -> str:
        return _("%(age)s ago") % {"age": display.duration(_silent_s(worker))}

    @admin.display(description=gettext_lazy("lanes"))
    def lanes_display(self, worker: Worker) -> str:
        if worker.lanes:
            return ", ".join(str(lane) for lane in worker.lanes)
        if worker.exclude_lanes:
            return _("all but %(lanes)s") % {
                "lanes": ", ".join(str(lane) for lane in worker.exclude_lanes)
            }
        return _("all")

    @admin.display(description=gettext_lazy("running jobs"))
    def running_jobs(self, worker: Worker) -> SafeString | int:
        count = int(page_info(worker, self)["running"])
        if not count:
            return 0
        # Both filters show in the job list's sidebar (state, worker).
        query = urlencode({"state__exact": State.RUNNING.value, "claimed_by": worker.worker_id})
        url = reverse("admin:django_watchdog_job_changelist") + "?" + query
        return format_html('<a href="{}">{}</a>', url, count)


def _silent_s(worker: Worker) -> float:
    """Seconds since ``worker``'s last heartbeat on the database's clock (0 if ahead)."""
    silent = getattr(worker, "silent_s", None)
    if silent is None:  # a row not read through WorkerAdmin.get_queryset
        silent = (timezone.now() - worker.heartbeat_at).total_seconds()
    return max(0.0, float(silent))
