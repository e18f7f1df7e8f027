"""The queues admin: each queue's head, its jobs by state, and purging its queued jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE
from django.contrib.admin.views.main import ChangeList
from django.db import router
from django.db.models import Count, Exists, OuterRef, Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import api
from ..domain.states import State
from ..models import Job, Queue
from ..store.store import Store
from . import confirmation, display
from .base import PAGE_INFO, ReadOnlyAdmin, page_info
from .jobs import jobs_url


class WorkFilter(admin.SimpleListFilter):
    """Queues with queued or running jobs by default; idle ones one click away.

    Queue rows outlive their jobs (enqueue relies on them: see ``Queue``; retention
    forgets only idle task queues), so a queue per report accumulates; the list leaves
    the idle ones out of the way instead.
    Each queue row is probed for pending jobs in their indexes (``has_pending_jobs``).
    """

    title = gettext_lazy("work")
    parameter_name = "work"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("idle", _("idle only")), ("all", _("all queues"))]

    def choices(self, changelist: ChangeList) -> Any:
        yield {
            "selected": self.value() is None,
            "query_string": changelist.get_query_string(remove=[self.parameter_name]),
            "display": _("with queued or running jobs"),
        }
        for value, label in self.lookup_choices:
            yield {
                "selected": self.value() == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": label,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Queue]) -> QuerySet[Queue]:
        if self.value() == "all":
            return queryset
        if self.value() == "idle":
            return queryset.exclude(has_pending_jobs())
        return queryset.filter(has_pending_jobs())


def has_pending_jobs() -> Q:
    """The queue has a running job (the one-running-per-queue index), a waiting one (the
    queue-order index) or a delayed one: probes per queue row, never a read of every
    pending job (a queue of a million queued jobs costs what a queue of one does)."""
    queued = Job.objects.filter(queue=OuterRef("name"), state=State.QUEUED)
    return (
        Q(Exists(Job.objects.filter(queue=OuterRef("name"), state=State.RUNNING)))
        | Q(Exists(queued.filter(delayed=False)))
        | Q(Exists(queued.filter(delayed=True)))
    )


#: The queue list counts each shown queue's jobs of a state exactly up to this many.
PAGE_COUNT_CAP = 100


def _capped(count: int) -> int | str:
    return f"{PAGE_COUNT_CAP}+" if count > PAGE_COUNT_CAP else count


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
    list_filter = (WorkFilter,)
    search_fields = ("name",)
    search_help_text = gettext_lazy("The beginning of a queue name.")
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
        """Heads and per-state counts for the shown queues, each count exact up to
        ``PAGE_COUNT_CAP`` ("100+" past it), reading at most that many jobs of each queue
        shown (``Store.capped_counts``), and one statement for every head shown."""
        if not rows:
            return
        names = [row.name for row in rows]
        db = rows[0]._state.db or router.db_for_read(Job)
        store = Store(db)
        shown_heads = store.queue_heads(names)
        counts: dict[tuple[str, str], int] = {}
        oldest: dict[str, Any] = {}
        for queue, state, count, enqueued_at in store.capped_counts(names, PAGE_COUNT_CAP + 1):
            counts[(queue, state)] = count
            if enqueued_at is not None:
                oldest[queue] = enqueued_at
        now = timezone.now()
        for row in rows:
            setattr(
                row,
                PAGE_INFO,
                {
                    "head": shown_heads[row.name],
                    "counts": {state: counts.get((row.name, state), 0) for state in State},
                    "oldest_queued_age": display.age(oldest.get(row.name), now),
                },
            )

    @admin.display(description=gettext_lazy("head"))
    def head_state(self, queue: Queue) -> str:
        head = page_info(queue, self)["head"]
        return (
            _("%(state)s (cancellation requested)") % {"state": head.state}
            if head.cancellation_requested
            else str(head.state)
        )

    @admin.display(description=gettext_lazy("head job"))
    def head_job(self, queue: Queue) -> SafeString | str:
        head = page_info(queue, self)["head"]
        if head.job_id is None:
            return display.EMPTY
        url = reverse("admin:django_watchdog_job_changelist") + "?" + urlencode({"q": head.job_id})
        return format_html('<a href="{}">{}</a>', url, head.job_id)

    @admin.display(description=gettext_lazy("queued"))
    def queued_count(self, queue: Queue) -> int | str:
        return _capped(page_info(queue, self)["counts"][State.QUEUED])

    @admin.display(description=gettext_lazy("running"))
    def running_count(self, queue: Queue) -> int | str:
        return _capped(page_info(queue, self)["counts"][State.RUNNING])

    @admin.display(description=gettext_lazy("settled"))
    def settled_count(self, queue: Queue) -> int | str:
        return _capped(page_info(queue, self)["counts"][State.SETTLED])

    @admin.display(description=gettext_lazy("oldest queued"))
    def oldest_queued_age(self, queue: Queue) -> str:
        return str(page_info(queue, self)["oldest_queued_age"])

    @admin.display(description=gettext_lazy("jobs"))
    def jobs_link(self, queue: Queue) -> SafeString:
        return format_html(
            '<a href="{}">{}</a> · <a href="{}">{}</a>',
            jobs_url(queue=queue.name),
            _("The jobs of %(queue)s") % {"queue": queue.name},
            jobs_url(queue=queue.name, state__exact=State.QUEUED.value),
            _("its queued jobs"),
        )

    # Purging deletes jobs, so it needs the ``delete_job`` permission.

    def has_purge_queued_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_watchdog.delete_job")

    @admin.action(
        permissions=["purge_queued"],
        description=gettext_lazy("Purge the queued jobs of selected queues"),
    )
    def purge_queued(self, request: HttpRequest, queryset: QuerySet[Queue]) -> HttpResponse | None:
        names = list(
            queryset.order_by("name").values_list("name", flat=True)[
                : confirmation.ACTION_LIMIT + 1
            ]
        )
        if len(names) > confirmation.ACTION_LIMIT:
            self.message_user(
                request,
                _("Select at most %(limit)d queues to purge at once.")
                % {"limit": confirmation.ACTION_LIMIT},
                messages.ERROR,
            )
            return None
        queued = dict(
            Job.objects.using(queryset.db)
            .filter(queue__in=names, state=State.QUEUED)
            .order_by()
            .values("queue")
            .annotate(n=Count("id"))
            .values_list("queue", "n")
        )
        total = sum(queued.values())
        if not confirmation.confirmed(request) or not total:
            return confirmation.page(
                self,
                request,
                action="purge_queued",
                title=_("Purge queued jobs"),
                question=ngettext(
                    "Delete %(count)d queued job of these queues? Running and settled jobs "
                    "stay. Deleted jobs are gone: they never run and never reach the settled "
                    "feed.",
                    "Delete %(count)d queued jobs of these queues? Running and settled jobs "
                    "stay. Deleted jobs are gone: they never run and never reach the settled "
                    "feed.",
                    total,
                )
                % {"count": total},
                columns=(_("queue"), _("queued jobs")),
                rows=[(name, queued.get(name, 0)) for name in names],
                total=len(names),
                changes=bool(total),
                confirm_label=_("Yes, purge queued jobs"),
            )
        deleted = 0
        purged: list[Queue] = []
        for queue in Queue.objects.using(queryset.db).filter(name__in=names).order_by("name"):
            count = api.purge_queued(queue.name, using=queryset.db)
            deleted += count
            if count:
                purged.append(queue)
                confirmation.log(
                    request,
                    [queue],
                    CHANGE,
                    ngettext("Purged %(count)d queued job.", "Purged %(count)d queued jobs.", count)
                    % {"count": count},
                )
        self.message_user(
            request,
            ngettext("Purged %(count)d queued job", "Purged %(count)d queued jobs", deleted)
            % {"count": deleted}
            + " "
            + ngettext("from %(count)d queue.", "from %(count)d queues.", len(purged))
            % {"count": len(purged)},
            messages.SUCCESS,
        )
        return None
