"""The queues admin: each queue's head, its jobs by state, and purging its queued jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import admin, messages
from django.db.models import Count, Min, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString

from .. import api
from ..domain.states import State
from ..models import Job, Queue
from . import confirmation, display
from .base import PAGE_INFO, ReadOnlyAdmin, page_info


@admin.register(Queue)
class QueueAdmin(ReadOnlyAdmin):
    list_display = (
        "name",
        "head_state",
        "head_job",
        "queued_count",
        "running_count",
        "settled_count",
        "oldest_queued_age",
        "created_at",
    )
    search_fields = ("name",)
    search_help_text = "The beginning of a queue name."
    ordering = ("name",)
    actions = ("purge_queued",)
    fields = (
        "name",
        "created_at",
        "head_state",
        "head_job",
        "queued_count",
        "running_count",
        "settled_count",
        "oldest_queued_age",
        "jobs_link",
    )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Queue], search_term: str
    ) -> tuple[QuerySet[Queue], bool]:
        term = search_term.strip()
        if not term:
            return queryset, False
        return queryset.filter(name__startswith=term), False

    def annotate_page(self, rows: Sequence[Any]) -> None:
        """Heads and per-state counts for the shown queues: one indexed query per state."""
        names = [row.name for row in rows]
        db = rows[0]._state.db if rows else None
        jobs = Job.objects.using(db)
        counts: dict[tuple[str, str], int] = {}
        oldest: dict[str, Any] = {}
        for state in State:
            grouped = (
                jobs.filter(queue__in=names, state=state)
                .order_by()
                .values("queue")
                .annotate(n=Count("id"), oldest=Min("enqueued_at"))
            )
            for group in grouped:
                counts[(group["queue"], state)] = group["n"]
                if state == State.QUEUED:
                    oldest[group["queue"]] = group["oldest"]
        now = timezone.now()
        for row in rows:
            setattr(
                row,
                PAGE_INFO,
                {
                    "head": api.queue_head(row.name, using=db),
                    "counts": {state: counts.get((row.name, state), 0) for state in State},
                    "oldest_queued_age": display.age(oldest.get(row.name), now),
                },
            )

    @admin.display(description="head")
    def head_state(self, queue: Queue) -> str:
        head = page_info(queue, self)["head"]
        return (
            f"{head.state} (cancellation requested)"
            if head.cancellation_requested
            else str(head.state)
        )

    @admin.display(description="head job")
    def head_job(self, queue: Queue) -> SafeString | str:
        head = page_info(queue, self)["head"]
        if head.job_id is None:
            return display.EMPTY
        url = reverse("admin:django_watchdog_job_changelist") + "?" + urlencode({"q": head.job_id})
        return format_html('<a href="{}">{}</a>', url, head.job_id)

    @admin.display(description="queued")
    def queued_count(self, queue: Queue) -> int:
        return int(page_info(queue, self)["counts"][State.QUEUED])

    @admin.display(description="running")
    def running_count(self, queue: Queue) -> int:
        return int(page_info(queue, self)["counts"][State.RUNNING])

    @admin.display(description="settled")
    def settled_count(self, queue: Queue) -> int:
        return int(page_info(queue, self)["counts"][State.SETTLED])

    @admin.display(description="oldest queued")
    def oldest_queued_age(self, queue: Queue) -> str:
        return str(page_info(queue, self)["oldest_queued_age"])

    @admin.display(description="jobs")
    def jobs_link(self, queue: Queue) -> SafeString:
        url = reverse("admin:django_watchdog_job_changelist") + "?" + urlencode({"q": queue.name})
        return format_html('<a href="{}">The jobs of {}</a>', url, queue.name)

    # Purging deletes jobs, so it needs the ``delete_job`` permission.

    def has_purge_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_watchdog.delete_job")

    @admin.action(permissions=["purge"], description="Purge the queued jobs of selected queues")
    def purge_queued(self, request: HttpRequest, queryset: QuerySet[Queue]) -> HttpResponse | None:
        names = list(
            queryset.order_by("name").values_list("name", flat=True)[
                : confirmation.ACTION_LIMIT + 1
            ]
        )
        if len(names) > confirmation.ACTION_LIMIT:
            self.message_user(
                request,
                f"Select at most {confirmation.ACTION_LIMIT} queues to purge at once.",
                messages.ERROR,
            )
            return None
        if not confirmation.confirmed(request):
            queued = dict(
                Job.objects.using(queryset.db)
                .filter(queue__in=names, state=State.QUEUED)
                .order_by()
                .values("queue")
                .annotate(n=Count("id"))
                .values_list("queue", "n")
            )
            return confirmation.page(
                self,
                request,
                action="purge_queued",
                title="Purge queued jobs",
                question=(
                    "Delete the queued jobs of these queues? Running and settled jobs stay. "
                    "Deleted jobs are gone: they never run and never reach the settled feed."
                ),
                columns=("queue", "queued jobs"),
                rows=[(name, queued.get(name, 0)) for name in names],
                total=len(names),
                confirm_label="Yes, purge queued jobs",
            )
        deleted = sum(api.purge_queued(name, using=queryset.db) for name in names)
        self.message_user(
            request,
            f"Purged {deleted} queued job(s) from {len(names)} queue(s).",
            messages.SUCCESS,
        )
        return None
