"""Row counts that stay cheap on a million rows, for the admin's change lists."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.models import QuerySet

from .dialects import dialect, supported


def bounded_count(queryset: QuerySet[Any], limit: int, order: Sequence[str] = ()) -> int:
    """Count ``queryset`` exactly, but stop at ``limit + 1`` rows (read in ``order``: the
    order of the index meant to serve them, which steers the planner to it)."""
    return queryset.order_by(*order)[: limit + 1].count()


def planner_estimate(queryset: QuerySet[Any]) -> int | None:
    """The planner's row estimate for ``queryset`` where the database offers one (it
    costs the same on ten rows and on ten million); ``None`` elsewhere."""
    if not supported(queryset.db):
        return None
    sql, params = queryset.order_by().query.get_compiler(using=queryset.db).as_sql()
    return dialect(queryset.db).row_estimate(sql, params)


def count_or_estimate(
    queryset: QuerySet[Any], limit: int, order: Sequence[str] = ()
) -> tuple[int, bool]:
    """``queryset``'s rows counted exactly up to ``limit``, and whether the count is exact:
    past ``limit`` the planner's estimate (never below what was counted) where the
    database offers one, else the exact count (SQLite, on one machine)."""
    counted = bounded_count(queryset, limit, order)
    if counted <= limit:
        return counted, True
    estimate = planner_estimate(queryset)
    if estimate is None:
        return int(queryset.order_by().count()), True
    return max(estimate, counted), False


def distinct_values(queryset: QuerySet[Any], field: str, limit: int) -> list[Any]:
    """Up to ``limit`` distinct values of ``field`` in ``queryset``, in order: one index
    probe per value (``field > last ORDER BY field LIMIT 1``, a skip scan), so the cost
    follows the values found, not the rows behind them."""
    ordered = queryset.order_by(field).values_list(field, flat=True)
    found: list[Any] = []
    while len(found) < limit:
        after = ordered.filter(**{f"{field}__gt": found[-1]}) if found else ordered
        value = after.first()
        if value is None:
            return found
        found.append(value)
    return found
