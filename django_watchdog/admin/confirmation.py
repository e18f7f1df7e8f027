"""The confirmation page every watchdog admin action shows before it calls a verb."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib.admin import ModelAdmin, helpers
from django.http import HttpRequest
from django.template.response import TemplateResponse

TEMPLATE = "django_watchdog/admin/confirm_action.html"

#: An action refuses more rows than this in one request (``select across`` a million rows).
ACTION_LIMIT = 1_000
#: Rows listed on a confirmation page; the rest are summed up as "and N more".
SHOWN_ROWS = 100


def confirmed(request: HttpRequest) -> bool:
    """Whether this POST comes from the confirmation page's submit button."""
    return request.POST.get("post") == "yes"


def page(
    model_admin: ModelAdmin[Any],
    request: HttpRequest,
    *,
    action: str,
    title: str,
    question: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    total: int,
    confirm_label: str,
    form: forms.Form | None = None,
    note: str = "",
) -> TemplateResponse:
    """Render the page that repeats the selection and posts it back with ``post=yes``."""
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
        "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
        "select_across": request.POST.get("select_across") == "1",
        "confirm_label": confirm_label,
        "back_url": request.get_full_path(),
    }
    request.current_app = model_admin.admin_site.name
    return TemplateResponse(request, TEMPLATE, context)
