"""The confirmation page every watchdog admin action shows before it calls a verb, and the
history entries it writes after.

The page extends Django's ``admin/base_site.html`` and writes its breadcrumbs as the
running Django's own pages do (a list from Django 6, a ``div`` before), so it follows the
admin's styling. It offers no confirm button when nothing would change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import django
from django import forms
from django.contrib.admin import ModelAdmin, helpers
from django.contrib.admin.models import LogEntry
from django.db.models import Model
from django.http import HttpRequest
from django.template.response import TemplateResponse

TEMPLATE = "django_watchdog/admin/confirm_action.html"

#: An action refuses more rows than this in one request (``select across`` a million rows).
ACTION_LIMIT = 1_000
#: Rows listed on a confirmation page; the rest are summed up as "and N more".
SHOWN_ROWS = 100
#: Django 6 writes its breadcrumbs as an ``<ol>`` of ``<li>``; 5.2 as one ``<div>``.
BREADCRUMBS_AS_LIST = django.VERSION >= (6, 0)


def confirmed(request: HttpRequest) -> bool:
    """Whether this POST comes from the confirmation page's submit button."""
    return request.POST.get("post") == "yes"


def requester(request: HttpRequest) -> str:
    """Who acts, as recorded on the jobs an admin action changes: ``admin:<username>``."""
    return f"admin:{request.user.get_username()}"[:150]


def page(
    model_admin: ModelAdmin[Any],
    request: HttpRequest,
    *,
    action: str | None,
    title: str,
    question: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    total: int,
    confirm_label: str,
    changes: bool = True,
    form: forms.Form | None = None,
    note: str = "",
    obj: Any = None,
    hidden: Mapping[str, str] | None = None,
    back_url: str | None = None,
) -> TemplateResponse:
    """Render the page that repeats the selection and posts it back with ``post=yes``.

    ``action`` names the changelist action to post back to; ``None`` posts to this page's
    URL (a button on one object's page, ``obj``). ``changes=False`` shows the question
    without a confirm button: confirming would change nothing.
    """
    opts = model_admin.model._meta
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": opts,
        "title": title,
        "question": question,
        "columns": columns,
        "rows": rows[:SHOWN_ROWS],
        "more": max(0, total - min(len(rows), SHOWN_ROWS)),
        "note": note,
        "form": form,
        "action": action,
        "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME) if action else [],
        "select_across": request.POST.get("select_across") == "1",
        "hidden": dict(hidden or {}),
        "confirm_label": confirm_label,
        "changes": changes,
        "object": obj,
        "breadcrumbs_as_list": BREADCRUMBS_AS_LIST,
        "back_url": back_url or request.get_full_path(),
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, TEMPLATE, context)


def log(request: HttpRequest, objects: Sequence[Model], flag: int, message: str) -> None:
    """One ``LogEntry`` per object: who (the request's user), when (now), what."""
    if objects and request.user.pk is not None:
        LogEntry.objects.log_actions(
            user_id=request.user.pk, queryset=objects, action_flag=flag, change_message=message
        )
