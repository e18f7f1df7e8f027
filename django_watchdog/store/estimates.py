"""Row counts that stay cheap on a million rows, for the admin's change lists."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from .dialects import dialect, supported


def bounded_count(queryset: QuerySet[Any], limit: int) -> int:
    """Count ``queryset`` exactly, but stop at ``limit + 1`` rows."""
    return queryset.order_by()[: limit + 1].count()


def planner_estimate(queryset: QuerySet[Any]) -> int | None:
    """The planner's row estimate for ``queryset`` where the database offers one (it
    costs the same on ten rows and on ten million); ``None`` elsewhere."""
    if not supported(queryset.db):
        return None
    sql, params = queryset.order_by().query.get_compiler(using=queryset.db).as_sql()
    return dialect(queryset.db).row_estimate(sql, params)
