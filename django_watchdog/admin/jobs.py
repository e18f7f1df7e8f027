"""The jobs admin: browse jobs, see why each waits or how long it runs, read its data.

The actions (cancel, re-run, fail a lane) live in ``job_actions`` and the modules it composes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from .. import handlers
from ..domain.states import Outcome, State
from ..models import PENDING_JOBS, UNSUCCESSFUL_JOBS, Job, Worker
from ..store import estimates
from . import display, waiting
from .base import PAGE_INFO, ReadOnlyAdmin, page_info
from .dashboard import DashboardMixin
from .job_actions import JobActions

#: Lanes offered by the lane filter are read from the pending jobs' index up to this many.
LANE_CHOICES_LIMIT = 50


def queue_filter(queue: str) -> Q:
    """``queue = name``, split so each part is served by one partial index whose condition
    it says (SQLite proves nothing more): the queue's order (``head``), its delayed jobs,
    its running job, its settled jobs. Its queued jobs as one part had no index on SQLite,
    which then read the whole table for a page of the list."""
    return (
        Q(queue=queue, state=State.QUEUED, delayed=False)
        | Q(queue=queue, state=State.QUEUED, delayed=True)
        | Q(queue=queue, state=State.RUNNING)
        | Q(queue=queue, state=State.SETTLED)
    )


def jobs_url(**filters: str) -> str:
    """The job list with ``filters`` applied (each one shown by its filter in the sidebar)."""
    return reverse("admin:django_watchdog_job_changelist") + "?" + urlencode(filters)


class LaneFilter(admin.SimpleListFilter):
    """Lanes with a handler, a worker or pending work; the pending jobs' lanes one index
    probe each (a skip scan), never a DISTINCT over all jobs or all pending jobs."""

    title = gettext_lazy("lane")
    parameter_name = "lane"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        lanes: set[str] = set(handlers.registered())
        for served, excluded in Worker.objects.values_list("lanes", "exclude_lanes"):
            named = [*(served or []), *(excluded or [])]
            lanes.update(lane for lane in named if isinstance(lane, str))
        pending = Job.objects.filter(PENDING_JOBS)
        lanes.update(estimates.distinct_values(pending, "lane", LANE_CHOICES_LIMIT))
        if self.value():
            lanes.add(str(self.value()))
        return [(lane, lane) for lane in sorted(lanes)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if value is None:
            return queryset
        return queryset.filter(lane=value)


class OutcomeFilter(admin.SimpleListFilter):
    """Settled jobs by outcome; the unsuccessful ones come from their own partial index."""

    title = gettext_lazy("outcome")
    parameter_name = "outcome"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(outcome.value, outcome.value) for outcome in Outcome]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if value is None:
            return queryset
        if value == Outcome.COMPLETED.value:
            return queryset.filter(state=State.SETTLED, outcome=value)
        # The unsuccessful jobs' index condition, said whole: any outcome implies settled,
        # and any other outcome not completed, but SQLite proves neither (it read every job).
        return queryset.filter(UNSUCCESSFUL_JOBS, outcome=value)


class ChosenValueFilter(admin.SimpleListFilter):
    """A filter links set (from a queue's or a worker's page): it offers only the chosen
    value, so the sidebar shows what the list is filtered by and how to clear it."""

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        value = self.value()
        return [(str(value), str(value))] if value else []

    def has_output(self) -> bool:
        return bool(self.value())


class QueueFilter(ChosenValueFilter):
    title = gettext_lazy("queue")
    parameter_name = "queue"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        return queryset if value is None else queryset.filter(queue_filter(str(value)))


class WorkerFilter(ChosenValueFilter):
    title = gettext_lazy("worker")
    parameter_name = "claimed_by"

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        # Only running jobs name their worker in the running-jobs index.
        return (
            queryset
            if value is None
            else queryset.filter(state=State.RUNNING, claimed_by=str(value))
        )


@admin.register(Job)
class JobAdmin(DashboardMixin, JobActions, ReadOnlyAdmin):
    list_display = (
        "job_id",
        "queue_link",
        "lane",
        "priority",
        "state",
        "outcome",
        "progress",
        "recovery_count",
        "enqueued_at_display",
        "started_at_display",
        "settled_at_display",
        "duration_display",
    )
    list_filter = ("state", OutcomeFilter, LaneFilter, QueueFilter, WorkerFilter)
    search_fields = ("job_id", "queue")
    search_help_text = gettext_lazy("A job id (exact or its beginning) or a queue name (exact).")
    ordering = ("-id",)
    actions = ("cancel", "rerun", "fail_lane")
    change_form_template = "admin/django_watchdog/job/change_form.html"
    fieldsets = (
        (None, {"fields": ("job_id", "queue_link", "lane", "priority", "reruns_display")}),
        (
            gettext_lazy("State"),
            {
                "fields": (
                    "state",
                    "outcome",
                    "progress",
                    "failure_reason",
                    "cancellation_id",
                    "cancellation_requested_by",
                    "rerun_requested_by",
                )
            },
        ),
        (
            gettext_lazy("Times"),
            {
                "fields": (
                    "enqueued_at_display",
                    "started_at_display",
                    "settled_at_display",
                    "duration_display",
                )
            },
        ),
        (
            gettext_lazy("Execution"),
            {
                "fields": (
                    "worker_link",
                    "attempts",
                    "recovery_count",
                    "max_recoveries",
                    "run_after_display",
                    "retry_at_display",
                    "timeout",
                    "feed_position",
                )
            },
        ),
        (
            gettext_lazy("Data"),
            {"fields": ("payload_display", "result_display", "traceback_display")},
        ),
    )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        """A job id by its beginning (the unique index), or an exact queue (partial indexes)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(Q(job_id__startswith=term) | queue_filter(term)), False

    def annotate_page(self, rows: Sequence[Any]) -> None:
        """Why each queued job of the page waits: a fixed number of indexed queries."""
        db = rows[0]._state.db if rows else None
        around = waiting.surroundings(rows, db)
        now = timezone.now()
        for row in rows:
            setattr(row, PAGE_INFO, {"progress": _progress(row, around, now)})

    # Columns and fields

    @admin.display(description=gettext_lazy("progress"))
    def progress(self, job: Job) -> str:
        return str(page_info(job, self)["progress"])

    @admin.display(description=gettext_lazy("queue"))
    def queue_link(self, job: Job) -> SafeString:
        url = reverse("admin:django_watchdog_queue_change", args=[quote(job.queue)])
        return format_html(
            '<a href="{}">{}</a> (<a href="{}">{}</a>)',
            url,
            job.queue,
            jobs_url(queue=job.queue),
            _("its jobs"),
        )

    @admin.display(description=gettext_lazy("worker"))
    def worker_link(self, job: Job) -> SafeString | str:
        if not job.claimed_by:
            return display.EMPTY
        url = reverse("admin:django_watchdog_worker_change", args=[quote(job.claimed_by)])
        return format_html('<a href="{}">{}</a>', url, job.claimed_by)

    @admin.display(description=gettext_lazy("re-runs"))
    def reruns_display(self, job: Job) -> SafeString | str:
        """The job this one re-runs, and the jobs that re-run this one (first 50)."""
        wanted = Q(rerun_of=job.job_id)
        if job.rerun_of:
            wanted |= Q(job_id=job.rerun_of)
        related = list(
            Job.objects.using(job._state.db)
            .filter(wanted)
            .order_by("id")
            .values_list("pk", "job_id")[:50]
        )
        lines: list[SafeString] = []
        for pk, job_id in related:
            url = reverse("admin:django_watchdog_job_change", args=[pk])
            label = _("re-run of") if job_id == job.rerun_of else _("re-run as")
            lines.append(format_html('{} <a href="{}">{}</a>', label, url, job_id))
        if job.rerun_of and all(job_id != job.rerun_of for _pk, job_id in related):
            lines.insert(0, format_html("{} {} ({})", _("re-run of"), job.rerun_of, _("pruned")))
        if not lines:
            return display.EMPTY
        return format_html_join(mark_safe("<br>"), "{}", ((line,) for line in lines))  # noqa: S308

    @admin.display(description=gettext_lazy("enqueued at"))
    def enqueued_at_display(self, job: Job) -> str:
        return display.timestamp(job.enqueued_at)

    @admin.display(description=gettext_lazy("started at"))
    def started_at_display(self, job: Job) -> str:
        return display.timestamp(job.started_at)

    @admin.display(description=gettext_lazy("settled at"))
    def settled_at_display(self, job: Job) -> str:
        return display.timestamp(job.settled_at)

    @admin.display(description=gettext_lazy("run after"))
    def run_after_display(self, job: Job) -> str:
        return display.timestamp(job.run_after)

    @admin.display(description=gettext_lazy("retry at"))
    def retry_at_display(self, job: Job) -> str:
        return display.timestamp(job.retry_at)

    @admin.display(description=gettext_lazy("duration"))
    def duration_display(self, job: Job) -> str:
        return display.duration(job.duration)

    @admin.display(description=gettext_lazy("payload"))
    def payload_display(self, job: Job) -> SafeString:
        return display.pretty_json(job.payload)

    @admin.display(description=gettext_lazy("result"))
    def result_display(self, job: Job) -> SafeString | str:
        if job.state != State.SETTLED:
            return display.EMPTY
        return display.pretty_json(job.result)

    @admin.display(description=gettext_lazy("traceback"))
    def traceback_display(self, job: Job) -> SafeString | str:
        return display.pretty_text(job.traceback)


def _progress(job: Job, around: waiting.Surroundings | None, now: Any) -> str:
    """Queued: for how long and why. Running: for how long, and where. Settled: nothing."""
    if job.state == State.QUEUED and around is not None:
        return _("queued %(for)s: %(why)s") % {
            "for": display.age(job.enqueued_at, now),
            "why": waiting.reason(job, around, now),
        }
    if job.state == State.RUNNING:
        return _("running for %(for)s on %(worker)s") % {
            "for": display.age(job.started_at, now),
            "worker": job.claimed_by or display.EMPTY,
        }
    return display.EMPTY
