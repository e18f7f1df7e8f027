"""What the jobs admin's actions share: finding the job a button names, the selected rows.

Every action goes through the public verbs, records who asked on the job where the verb
takes it (``admin:<username>``), and writes a ``LogEntry`` per job (or queue) it changed
(``confirmation.log``), so the admin's history says who did what and when.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404, HttpRequest
from django.urls import reverse
from django.utils.translation import gettext as _

from ..models import Job
from . import confirmation


class JobActionsBase(admin.ModelAdmin):  # type: ignore[type-arg]
    """The helpers of the jobs admin's actions and per-job buttons."""

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


def state_of(job: Job) -> str:
    """The job's state as a confirmation page says it ("settled failed")."""
    return f"{job.state} {job.outcome}" if job.outcome else str(job.state)
