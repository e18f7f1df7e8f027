"""The jobs admin's cancel: an action over selected jobs and a button on a job's page
(``<pk>/cancel/``), both confirmed first, both through ``api.cancel``."""

from __future__ import annotations

from collections.abc import Sequence

from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import api
from ..domain.states import PENDING_STATES, State
from ..models import Job
from . import confirmation
from .job_action_base import JobActionsBase, state_of


class CancelActions(JobActionsBase):
    """Request cancellation of jobs (``change_job``: it changes jobs through a verb)."""

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_watchdog.change_job")

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        job = self._job_for(request, object_id, self.has_cancel_permission(request))
        page_url = self._job_url(job, "change")
        changes = job.state in PENDING_STATES and job.cancellation_id is None
        if request.method == "POST" and confirmation.confirmed(request) and changes:
            self._cancel(request, [job.job_id], job._state.db or "default")
            return HttpResponseRedirect(page_url)
        return confirmation.page(
            self,
            request,
            action=None,
            obj=job,
            title=_("Request cancellation"),
            question=(
                _(
                    "Record a cancellation for job %(job)s? A queued job settles cancelled "
                    "without running; a running job's handler is asked to stop."
                )
                if changes
                else _("Job %(job)s is %(state)s: a cancellation would change nothing.")
            )
            % {"job": job.job_id, "state": state_of(job)},
            columns=(),
            rows=(),
            total=0,
            changes=changes,
            confirm_label=_("Yes, request cancellation"),
            back_url=page_url,
        )

    @admin.action(
        permissions=["cancel"], description=gettext_lazy("Request cancellation of selected jobs")
    )
    def cancel(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        jobs = self._selected(request, queryset, ("job_id", "queue", "state", "cancellation_id"))
        if jobs is None:
            return None
        pending = [job for job in jobs if job[2] != State.SETTLED and job[3] is None]
        if not confirmation.confirmed(request) or not pending:
            left = len(jobs) - len(pending)
            return confirmation.page(
                self,
                request,
                action="cancel",
                title=_("Request cancellation"),
                question=ngettext(
                    "Record a cancellation for %(count)d pending job? A queued job settles "
                    "cancelled without running; a running job's handler is asked to stop.",
                    "Record a cancellation for %(count)d pending jobs? A queued job settles "
                    "cancelled without running; a running job's handler is asked to stop.",
                    len(pending),
                )
                % {"count": len(pending)},
                columns=(_("job id"), _("queue"), _("state")),
                rows=[job[:3] for job in jobs],
                total=len(jobs),
                changes=bool(pending),
                note=ngettext(
                    "%(count)d job is settled or already has a cancellation: it is left as it is.",
                    "%(count)d jobs are settled or already have a cancellation: they are left "
                    "as they are.",
                    left,
                )
                % {"count": left}
                if left
                else "",
                confirm_label=_("Yes, request cancellation"),
            )
        self._cancel(request, [job_id for job_id, *_rest in pending], queryset.db)
        return None

    def _cancel(self, request: HttpRequest, job_ids: Sequence[str], using: str) -> None:
        counts: dict[str, int] = {}
        recorded: list[str] = []
        who = confirmation.requester(request)
        for job_id in job_ids:
            status = api.cancel(job_id, requested_by=who, using=using).status
            counts[status] = counts.get(status, 0) + 1
            if status == "recorded":
                recorded.append(job_id)
        confirmation.log(
            request,
            list(Job.objects.using(using).filter(job_id__in=recorded)),
            CHANGE,
            _("Requested cancellation."),
        )
        summary = ", ".join(f"{status}: {n}" for status, n in sorted(counts.items()))
        self.message_user(
            request,
            ngettext(
                "Cancellation requested for %(count)d job (%(summary)s).",
                "Cancellation requested for %(count)d jobs (%(summary)s).",
                len(job_ids),
            )
            % {"count": len(job_ids), "summary": summary},
            messages.SUCCESS,
        )
