"""What the jobs admin does: request cancellation, re-run, fail lanes; each confirmed first.

Every action goes through the public verbs, records who asked on the job where the verb
takes it (``admin:<username>``), and writes a ``LogEntry`` per job (or queue) it changed,
so the admin's history says who did what and when. Cancel and re-run are also buttons on
a job's page (``<pk>/cancel/``, ``<pk>/rerun/``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import api
from ..domain.errors import InvalidInput, WatchdogError
from ..domain.reruns import RERUNNABLE
from ..domain.states import PENDING_STATES, State
from ..domain.validation import REASON_MAX
from ..models import Job
from ..store.estimates import bounded_count
from ..store.reruns import next_rerun_id
from . import confirmation

#: Each lane's ``fail_lane`` loop stops after this many batches; the admin says so.
FAIL_LANE_MAX_BATCHES = 400
#: The hidden field of a re-run confirmation naming the re-run id one job gets.
RERUN_FIELD = "rerun_id_"


class FailLaneForm(forms.Form):
    reason = forms.CharField(
        max_length=REASON_MAX,
        help_text=gettext_lazy("Stored as the failure reason of every pending job of the lane."),
        widget=forms.TextInput(attrs={"size": 80}),
    )


def rerunnable(state: str, outcome: str | None) -> bool:
    return state == State.SETTLED and outcome in RERUNNABLE


def log(request: HttpRequest, objects: Sequence[Model], flag: int, message: str) -> None:
    """One ``LogEntry`` per object: who (the request's user), when (now), what."""
    if objects and request.user.pk is not None:
        LogEntry.objects.log_actions(
            user_id=request.user.pk, queryset=objects, action_flag=flag, change_message=message
        )


class JobActions(admin.ModelAdmin):  # type: ignore[type-arg]
    """The actions and per-job buttons of ``JobAdmin``."""

    # Cancelling and failing change jobs through the store's verbs, so they need the
    # ``change_job`` permission (no field is ever edited by hand); a re-run adds a job.

    def has_cancel_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_watchdog.change_job")

    def has_fail_lane_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_watchdog.change_job")

    def has_rerun_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_watchdog.add_job")

    def get_urls(self) -> list[URLPattern]:
        name = f"{self.opts.app_label}_{self.opts.model_name}"
        return [
            path(
                "<path:object_id>/cancel/",
                self.admin_site.admin_view(self.cancel_view),
                name=f"{name}_cancel",
            ),
            path(
                "<path:object_id>/rerun/",
                self.admin_site.admin_view(self.rerun_view),
                name=f"{name}_rerun",
            ),
            *super().get_urls(),
        ]

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        """The job's page, with a cancel or re-run button when that would change something."""
        job = self.get_object(request, unquote(object_id))
        buttons: dict[str, str] = {}
        if job is not None:
            if job.state in PENDING_STATES and job.cancellation_id is None:
                if self.has_cancel_permission(request):
                    buttons["watchdog_cancel_url"] = self._job_url(job, "cancel")
            if rerunnable(job.state, job.outcome) and self.has_rerun_permission(request):
                buttons["watchdog_rerun_url"] = self._job_url(job, "rerun")
        return super().change_view(
            request, object_id, form_url, extra_context={**(extra_context or {}), **buttons}
        )

    def _job_url(self, job: Job, view: str) -> str:
        return reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_{view}", args=[quote(job.pk)]
        )

    def _job_for(self, request: HttpRequest, object_id: str, allowed: bool) -> Job:
        job = self.get_object(request, unquote(object_id))
        if job is None:
            raise Http404(_("No job with primary key %(pk)s.") % {"pk": object_id})
        if not (allowed and self.has_view_permission(request, job)):
            raise PermissionDenied
        return job  # type: ignore[no-any-return]

    # Cancel

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
            % {"job": job.job_id, "state": _state(job)},
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
    def cancel(
        self, request: HttpRequest, queryset: QuerySet[Job]
    ) -> HttpResponse | None:
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
        log(
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

    # Re-run

    def rerun_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        job = self._job_for(request, object_id, self.has_rerun_permission(request))
        using = job._state.db or "default"
        changes = rerunnable(job.state, job.outcome)
        if request.method == "POST" and confirmation.confirmed(request) and changes:
            new = self._rerun(request, job, request.POST.get(RERUN_FIELD), using)
            if new is not None:
                return HttpResponseRedirect(self._job_url(new, "change"))
        new_id = next_rerun_id(using, job.job_id)
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
            % {"job": job.job_id, "new": new_id, "state": _state(job)},
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
            ids = {pk: next_rerun_id(queryset.db, job_id) for pk, job_id, *_rest in chosen}
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
        done = 0
        for job in Job.objects.using(queryset.db).filter(pk__in=[row[0] for row in chosen]):
            if self._rerun(request, job, request.POST.get(f"{RERUN_FIELD}{job.pk}"), queryset.db):
                done += 1
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
        log(request, [new], ADDITION, _("Re-run of %(job)s.") % {"job": job.job_id})
        log(request, [job], CHANGE, _("Re-run as %(new)s.") % {"new": new.job_id})
        self.message_user(
            request,
            _("Job %(job)s re-run as %(new)s.") % {"job": job.job_id, "new": new.job_id},
            messages.SUCCESS,
        )
        return new

    # Fail lanes

    @admin.action(
        permissions=["fail_lane"], description=gettext_lazy("Fail the lanes of selected jobs")
    )
    def fail_lane(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        limit = confirmation.ACTION_LIMIT
        chosen = list(queryset.order_by().values_list("lane", flat=True)[:limit])
        lanes = sorted(set(chosen))
        form = FailLaneForm(request.POST if confirmation.confirmed(request) else None)
        pending = {
            lane: bounded_count(
                Job.objects.using(queryset.db).filter(lane=lane, state__in=PENDING_STATES),
                confirmation.ACTION_LIMIT * 10,
            )
            for lane in lanes
        }
        if confirmation.confirmed(request) and form.is_valid() and any(pending.values()):
            reason = form.cleaned_data["reason"]
            try:
                report = [
                    self._fail_lane(request, lane, reason, queryset.db)
                    for lane in lanes
                    if pending[lane]
                ]
            except InvalidInput as error:
                form.add_error("reason", str(error))
            else:
                for message in report:
                    self.message_user(request, message, messages.SUCCESS)
                return None
        total = sum(pending.values())
        rows = [
            (
                lane,
                chosen.count(lane),
                _lane_effect(lane, pending[lane]),
            )
            for lane in lanes
        ]
        return confirmation.page(
            self,
            request,
            action="fail_lane",
            title=_("Fail lanes"),
            question=ngettext(
                "Fail %(jobs)s in %(count)d lane? This settles every queued and running job of "
                "the lane as failed, not only the %(selected)d selected. Running jobs lose their "
                "claim: their workers' results are rejected.",
                "Fail %(jobs)s in %(count)d lanes? This settles every queued and running job of "
                "these lanes as failed, not only the %(selected)d selected. Running jobs lose "
                "their claim: their workers' results are rejected.",
                len(lanes),
            )
            % {"jobs": _job_count(total), "count": len(lanes), "selected": len(chosen)},
            columns=(_("lane"), _("selected jobs"), _("will fail")),
            rows=rows,
            total=len(rows),
            form=form,
            changes=bool(total),
            confirm_label=_("Yes, fail these lanes"),
        )

    def _fail_lane(self, request: HttpRequest, lane: str, reason: str, using: str) -> str:
        settled = 0
        for _batch in range(FAIL_LANE_MAX_BATCHES):
            failure = api.fail_lane(lane, reason, using=using)
            settled += len(failure.jobs)
            log(
                request,
                list(failure.jobs),
                CHANGE,
                _("Failed with lane %(lane)s: %(reason)s") % {"lane": lane, "reason": reason},
            )
            if not failure.more or not failure.jobs:
                break
        else:
            return ngettext(
                "Lane %(lane)s: %(count)d job failed; more remain, run the action again.",
                "Lane %(lane)s: %(count)d jobs failed; more remain, run the action again.",
                settled,
            ) % {"lane": lane, "count": settled}
        return ngettext(
            "Lane %(lane)s: %(count)d job failed.",
            "Lane %(lane)s: %(count)d jobs failed.",
            settled,
        ) % {"lane": lane, "count": settled}

    def _selected(
        self, request: HttpRequest, queryset: QuerySet[Job], fields: Sequence[str]
    ) -> list[tuple[Any, ...]] | None:
        """The selected jobs' ``fields``; ``None`` (and an error shown) past the limit."""
        rows = list(queryset.order_by("id").values_list(*fields)[: confirmation.ACTION_LIMIT + 1])
        if len(rows) > confirmation.ACTION_LIMIT:
            self.message_user(
                request,
                _("Select at most %(limit)d jobs at once.") % {"limit": confirmation.ACTION_LIMIT},
                messages.ERROR,
            )
            return None
        return rows


def _state(job: Job) -> str:
    return f"{job.state} {job.outcome}" if job.outcome else str(job.state)


def _job_count(count: int) -> str:
    if count > confirmation.ACTION_LIMIT * 10:
        return _("more than %(count)d jobs") % {"count": count - 1}
    return ngettext("%(count)d job", "%(count)d jobs", count) % {"count": count}


def _lane_effect(lane: str, count: int) -> str:
    return _("%(jobs)s in lane %(lane)s") % {"jobs": _job_count(count), "lane": lane}
