"""The jobs admin's re-run: an action over selected jobs and a button on a job's page
(``<pk>/rerun/``), both confirmed first, both through ``api.rerun``. The confirmation page
names the id each re-run gets, so a double submit re-runs once."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.models import ADDITION, CHANGE
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import api
from ..domain.errors import WatchdogError
from ..domain.reruns import RERUNNABLE
from ..domain.states import State
from ..models import Job
from ..store.store import Store
from . import confirmation
from .job_action_base import JobActionsBase, state_of

#: The hidden field of a re-run confirmation naming the re-run id one job gets.
RERUN_FIELD = "rerun_id_"


def rerunnable(state: str, outcome: str | None) -> bool:
    return state == State.SETTLED and outcome in RERUNNABLE


class RerunActions(JobActionsBase):
    """Re-run settled jobs as new ones (``add_job``: a re-run adds a job)."""

    def has_rerun_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_watchdog.add_job")

    def rerun_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        job = self._job_for(request, object_id, self.has_rerun_permission(request))
        using = job._state.db or "default"
        changes = rerunnable(job.state, job.outcome)
        if request.method == "POST" and confirmation.confirmed(request) and changes:
            new = self._rerun(request, job, request.POST.get(RERUN_FIELD), using)
            if new is not None:
                return HttpResponseRedirect(self._job_url(new, "change"))
        new_id = Store(using).next_rerun_id(job.job_id)
        return confirmation.page(
            self,
            request,
            action=None,
            obj=job,
            title=_("Re-run"),
            question=(
                _(
                    "Enqueue job %(job)s's work again as a new job, %(new)s (same queue, lane, "
                    "priority, payload and recovery policy)? %(job)s stays %(state)s."
                )
                if changes
                else _(
                    "Job %(job)s is %(state)s: only a settled failed, interrupted or cancelled "
                    "job can be re-run."
                )
            )
            % {"job": job.job_id, "new": new_id, "state": state_of(job)},
            columns=(),
            rows=(),
            total=0,
            changes=changes,
            hidden={RERUN_FIELD: new_id},
            confirm_label=_("Yes, re-run"),
            back_url=self._job_url(job, "change"),
        )

    @admin.action(permissions=["rerun"], description=gettext_lazy("Re-run selected jobs"))
    def rerun(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        selected = self._selected(request, queryset, ("pk", "job_id", "state", "outcome"))
        if selected is None:
            return None
        chosen = [row for row in selected if rerunnable(row[2], row[3])]
        if not confirmation.confirmed(request) or not chosen:
            store = Store(queryset.db)
            ids = {pk: store.next_rerun_id(job_id) for pk, job_id, *_rest in chosen}
            left = len(selected) - len(chosen)
            return confirmation.page(
                self,
                request,
                action="rerun",
                title=_("Re-run"),
                question=ngettext(
                    "Enqueue %(count)d settled job's work again as a new job?",
                    "Enqueue %(count)d settled jobs' work again, each as a new job?",
                    len(chosen),
                )
                % {"count": len(chosen)},
                columns=(_("job id"), _("outcome"), _("re-run as")),
                rows=[
                    (job_id, outcome or state, ids.get(pk, "-"))
                    for pk, job_id, state, outcome in selected
                ],
                total=len(selected),
                changes=bool(chosen),
                note=ngettext(
                    "%(count)d job is not settled failed, interrupted or cancelled: it is not "
                    "re-run.",
                    "%(count)d jobs are not settled failed, interrupted or cancelled: they are "
                    "not re-run.",
                    left,
                )
                % {"count": left}
                if left
                else "",
                hidden={f"{RERUN_FIELD}{pk}": new_id for pk, new_id in ids.items()},
                confirm_label=_("Yes, re-run"),
            )
        for job in Job.objects.using(queryset.db).filter(pk__in=[row[0] for row in chosen]):
            self._rerun(request, job, request.POST.get(f"{RERUN_FIELD}{job.pk}"), queryset.db)
        return None

    def _rerun(
        self, request: HttpRequest, job: Job, rerun_id: str | None, using: str
    ) -> Job | None:
        """Re-run ``job`` as ``rerun_id`` (the id its confirmation page showed, so a double
        submit names one job); report, and log the new job and the original."""
        try:
            result = api.rerun(
                job.job_id,
                rerun_id=rerun_id or None,
                requested_by=confirmation.requester(request),
                using=using,
            )
        except WatchdogError as error:
            self.message_user(request, str(error), messages.ERROR)
            return None
        new = result.job
        if result.status == "duplicate":
            self.message_user(
                request,
                _("Job %(job)s was already re-run as %(new)s.") % {"job": job.job_id, "new": new},
                messages.INFO,
            )
            return new
        confirmation.log(request, [new], ADDITION, _("Re-run of %(job)s.") % {"job": job.job_id})
        confirmation.log(request, [job], CHANGE, _("Re-run as %(new)s.") % {"new": new.job_id})
        self.message_user(
            request,
            _("Job %(job)s re-run as %(new)s.") % {"job": job.job_id, "new": new.job_id},
            messages.SUCCESS,
        )
        return new
