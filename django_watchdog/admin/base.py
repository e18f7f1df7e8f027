"""What every watchdog admin shares: read-only rows, cheap counts, per-page annotations."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.views.main import ChangeList
from django.db import models
from django.http import HttpRequest

from ..domain.as_stored import reading_as_stored
from .pagination import EstimatedCountPaginator

#: Attribute under which ``annotate_page`` leaves its per-row figures on each instance.
PAGE_INFO = "_watchdog_page_info"


class PageChangeList(ChangeList):
    """A change list that lets its admin add figures for the rows of the shown page only."""

    def get_results(self, request: HttpRequest) -> None:
        super().get_results(request)
        # A row edited by hand into something that does not decode is listed as stored.
        with reading_as_stored():
            rows = list(self.result_list)  # evaluates (and caches) the page's queryset once
        annotate = getattr(self.model_admin, "annotate_page", None)
        if annotate is not None and rows:
            annotate(rows)


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Rows are written by the store's verbs only: nothing is added, changed or deleted here.

    The change lists never count the whole table, so they stay fast on a million rows.
    """

    paginator = EstimatedCountPaginator
    show_full_result_count = False
    list_per_page = 100
    sortable_by = ()  # sorting by another column would sort the table

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return PageChangeList

    def get_object(
        self, request: HttpRequest, object_id: str, from_field: str | None = None
    ) -> Any:
        """The row as stored, even one edited by hand into something that does not decode:
        the admin is where an operator looks at it."""
        with reading_as_stored():
            return super().get_object(request, object_id, from_field)

    def annotate_page(self, rows: list[models.Model]) -> None:
        """Attach per-row figures (``page_info``) computed for the shown rows together."""
        for row in rows:
            setattr(row, PAGE_INFO, {})


def page_info(row: models.Model, admin_site_model: ReadOnlyAdmin) -> dict[str, Any]:
    """The figures ``annotate_page`` attached to ``row``; computed now for a lone row."""
    info = getattr(row, PAGE_INFO, None)
    if info is None:
        admin_site_model.annotate_page([row])
        info = getattr(row, PAGE_INFO)
    return info  # type: ignore[no-any-return]
