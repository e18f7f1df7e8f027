"""The jobs admin: browse jobs, read their data, request cancellation, fail a lane."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import quote
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from .. import api, handlers
from ..domain.errors import InvalidInput
from ..domain.states import PENDING_STATES, Outcome, State
from ..domain.validation import REASON_MAX
from ..models import Job, Worker
from ..store.estimates import bounded_count
from . import confirmation, display
from .base import ReadOnlyAdmin
from .dashboard import DashboardMixin

#: Lanes offered by the lane filter are read from the pending jobs' index up to this many.
LANE_CHOICES_LIMIT = 50
#: Each lane's ``fail_lane`` loop stops after this many batches; the admin says so.
FAIL_LANE_MAX_BATCHES = 400


def queue_filter(queue: str) -> Q:
    """``queue = name``, split by state so each part is served by one partial index."""
    return (
        Q(queue=queue, state=State.QUEUED)
        | Q(queue=queue, state=State.RUNNING)
        | Q(queue=queue, state=State.SETTLED)
    )


class LaneFilter(admin.SimpleListFilter):
    """Lanes with a handler, a worker or pending work; never a DISTINCT over all jobs."""

    title = "lane"
    parameter_name = "lane"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        lanes: set[str] = set(handlers.registered())
        for served, excluded in Worker.objects.values_list("lanes", "exclude_lanes"):
            named = [*(served or []), *(excluded or [])]
            lanes.update(lane for lane in named if isinstance(lane, str))
        pending = (
            Job.objects.filter(state__in=PENDING_STATES)
            .order_by("lane")
            .values_list("lane", flat=True)
            .distinct()[:LANE_CHOICES_LIMIT]
        )
        lanes.update(pending)
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

    title = "outcome"
    parameter_name = "outcome"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(outcome.value, outcome.value) for outcome in Outcome]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        value = self.value()
        if value is None:
            return queryset
        # state=settled is implied by any outcome; saying it lets the planner use the index.
        return queryset.filter(state=State.SETTLED, outcome=value)


class FailLaneForm(forms.Form):
    reason = forms.CharField(
        max_length=REASON_MAX,
        help_text="Stored as the failure reason of every pending job of the lane.",
        widget=forms.TextInput(attrs={"size": 80}),
    )


@admin.register(Job)
class JobAdmin(DashboardMixin, ReadOnlyAdmin):
    list_display = (
        "job_id",
        "queue",
        "lane",
        "priority",
        "state",
        "outcome",
        "recovery_count",
        "enqueued_at",
        "started_at",
        "settled_at",
        "duration_display",
    )
    list_filter = ("state", OutcomeFilter, LaneFilter)
    search_fields = ("job_id", "queue")
    search_help_text = "A job id (exact or its beginning) or a queue name (exact)."
    ordering = ("-id",)
    actions = ("request_cancellation", "fail_lanes")
    fieldsets = (
        (None, {"fields": ("job_id", "queue_link", "lane", "priority")}),
        ("State", {"fields": ("state", "outcome", "failure_reason", "cancellation_id")}),
        ("Times", {"fields": ("enqueued_at", "started_at", "settled_at", "duration_display")}),
        (
            "Execution",
            {
                "fields": (
                    "claimed_by",
                    "attempts",
                    "recovery_count",
                    "max_recoveries",
                    "run_after",
                    "retry_at",
                    "timeout",
                    "feed_position",
                )
            },
        ),
        ("Data", {"fields": ("payload_display", "result_display", "traceback_display")}),
    )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Job], search_term: str
    ) -> tuple[QuerySet[Job], bool]:
        """A job id by its beginning (the unique index), or an exact queue (partial indexes)."""
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(Q(job_id__startswith=term) | queue_filter(term)), False

    @admin.display(description="duration")
    def duration_display(self, job: Job) -> str:
        return display.duration(job.duration)

    @admin.display(description="queue")
    def queue_link(self, job: Job) -> SafeString:
        url = reverse("admin:django_watchdog_queue_change", args=[quote(job.queue)])
        jobs_url = (
            reverse("admin:django_watchdog_job_changelist") + "?" + urlencode({"q": job.queue})
        )
        return format_html(
            '<a href="{}">{}</a> (<a href="{}">its jobs</a>)', url, job.queue, jobs_url
        )

    @admin.display(description="payload")
    def payload_display(self, job: Job) -> SafeString:
        return display.pretty_json(job.payload)

    @admin.display(description="result")
    def result_display(self, job: Job) -> SafeString | str:
        if job.state != State.SETTLED:
            return display.EMPTY
        return display.pretty_json(job.result)

    @admin.display(description="traceback")
    def traceback_display(self, job: Job) -> SafeString | str:
        return display.pretty_text(job.traceback)

    # Actions. Requesting cancellation and failing a lane change jobs through the store's
    # verbs, so they need the ``change_job`` permission (no field is ever edited by hand).

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_watchdog.change_job")

    def has_fail_lane_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_watchdog.change_job")

    @admin.action(permissions=["cancel"], description="Request cancellation of selected jobs")
    def request_cancellation(
        self, request: HttpRequest, queryset: QuerySet[Job]
    ) -> HttpResponse | None:
        jobs = list(
            queryset.order_by("id").values_list("job_id", "queue", "state")[
                : confirmation.ACTION_LIMIT + 1
            ]
        )
        if len(jobs) > confirmation.ACTION_LIMIT:
            self.message_user(
                request,
                f"Select at most {confirmation.ACTION_LIMIT} jobs to cancel at once.",
                messages.ERROR,
            )
            return None
        pending = [job for job in jobs if job[2] != State.SETTLED]
        if not confirmation.confirmed(request):
            return confirmation.page(
                self,
                request,
                action="request_cancellation",
                title="Request cancellation",
                question=(
                    f"Record a cancellation for {len(pending)} pending job(s)? A queued job "
                    "settles cancelled without running; a running job's handler is asked to stop."
                ),
                columns=("job id", "queue", "state"),
                rows=jobs,
                total=len(jobs),
                note=(
                    f"{len(jobs) - len(pending)} settled job(s) will be left as they are."
                    if len(pending) < len(jobs)
                    else ""
                ),
                confirm_label="Yes, request cancellation",
            )
        counts: dict[str, int] = {}
        for job_id, _queue, _state in pending:
            status = api.cancel(job_id, using=queryset.db).status
            counts[status] = counts.get(status, 0) + 1
        summary = ", ".join(f"{status}: {count}" for status, count in sorted(counts.items()))
        self.message_user(
            request,
            f"Cancellation requested for {len(pending)} job(s) ({summary or 'none pending'}).",
            messages.SUCCESS,
        )
        return None

    @admin.action(permissions=["fail_lane"], description="Fail the lanes of selected jobs")
    def fail_lanes(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        lanes = sorted(
            set(queryset.order_by().values_list("lane", flat=True)[: confirmation.ACTION_LIMIT])
        )
        form = FailLaneForm(request.POST if confirmation.confirmed(request) else None)
        if confirmation.confirmed(request) and form.is_valid():
            reason = form.cleaned_data["reason"]
            try:
                report = [self._fail_lane(lane, reason, queryset.db) for lane in lanes]
            except InvalidInput as error:
                form.add_error("reason", str(error))
            else:
                for message in report:
                    self.message_user(request, message, messages.SUCCESS)
                return None
        rows = [
            (
                lane,
                _bounded(
                    Job.objects.using(queryset.db).filter(lane=lane, state__in=PENDING_STATES)
                ),
            )
            for lane in lanes
        ]
        return confirmation.page(
            self,
            request,
            action="fail_lanes",
            title="Fail lanes",
            question=(
                "Settle every queued and running job of these lanes as failed? Running jobs "
                "lose their claim: their workers' results are rejected."
            ),
            columns=("lane", "pending jobs"),
            rows=rows,
            total=len(rows),
            form=form,
            confirm_label="Yes, fail these lanes",
        )

    def _fail_lane(self, lane: str, reason: str, using: str) -> str:
        settled = 0
        for _ in range(FAIL_LANE_MAX_BATCHES):
            failure = api.fail_lane(lane, reason, using=using)
            settled += len(failure.jobs)
            if not failure.more or not failure.jobs:
                break
        else:
            return f"Lane {lane!r}: {settled} job(s) failed; more remain, run the action again."
        return f"Lane {lane!r}: {settled} job(s) failed."


def _bounded(queryset: QuerySet[Job]) -> str:
    count = bounded_count(queryset, confirmation.ACTION_LIMIT * 10)
    return f"{count}" if count <= confirmation.ACTION_LIMIT * 10 else f"more than {count - 1}"
