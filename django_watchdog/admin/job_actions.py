"""What the jobs admin does: request cancellation, re-run, fail lanes; each confirmed first.

One module per action (``cancel_actions``, ``rerun_actions``, ``lane_actions``); this one
puts them together and adds the per-job buttons (``<pk>/cancel/``, ``<pk>/rerun/``) to a
job's page. Every action goes through the public verbs and leaves a ``LogEntry`` per job
it changed.
"""

from __future__ import annotations

from typing import Any

from django.contrib.admin.utils import unquote
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, path

from ..domain.states import PENDING_STATES
from .cancel_actions import CancelActions
from .lane_actions import FailLaneActions
from .rerun_actions import RerunActions, rerunnable


class JobActions(CancelActions, RerunActions, FailLaneActions):
    """The actions and per-job buttons of ``JobAdmin``.

    Cancelling and failing change jobs through the store's verbs, so they need the
    ``change_job`` permission (no field is ever edited by hand); a re-run adds a job.
    """

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
