"""The jobs admin's fail-lane action: settle every pending job of the selected jobs' lanes
``failed`` with a reason, confirmed first, through ``api.fail_lane`` in bounded batches."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.models import CHANGE
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import api
from ..domain.errors import InvalidInput
from ..domain.validation import REASON_MAX
from ..models import PENDING_JOBS, Job
from ..store.estimates import bounded_count
from . import confirmation
from .job_action_base import JobActionsBase

#: Each lane's ``fail_lane`` loop stops after this many batches; the admin says so.
FAIL_LANE_MAX_BATCHES = 400


class FailLaneForm(forms.Form):
    reason = forms.CharField(
        max_length=REASON_MAX,
        help_text=gettext_lazy("Stored as the failure reason of every pending job of the lane."),
        widget=forms.TextInput(attrs={"size": 80}),
    )


class FailLaneActions(JobActionsBase):
    """Fail lanes (``change_job``: it changes jobs through a verb)."""

    def has_fail_lane_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("django_watchdog.change_job")

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
                Job.objects.using(queryset.db).filter(PENDING_JOBS, lane=lane),
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
            confirmation.log(
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


def _job_count(count: int) -> str:
    if count > confirmation.ACTION_LIMIT * 10:
        return _("more than %(count)d jobs") % {"count": count - 1}
    return ngettext("%(count)d job", "%(count)d jobs", count) % {"count": count}


def _lane_effect(lane: str, count: int) -> str:
    return _("%(jobs)s in lane %(lane)s") % {"jobs": _job_count(count), "lane": lane}
