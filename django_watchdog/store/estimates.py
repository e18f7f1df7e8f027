"""Row counts that stay cheap on a million rows, for the admin's change lists."""

from __future__ import annotations

import json
from typing import Any

from django.db import connections
from django.db.models import QuerySet


def bounded_count(queryset: QuerySet[Any], limit: int) -> int:
    """Count ``queryset`` exactly, but stop at ``limit + 1`` rows."""
    return queryset.order_by()[: limit + 1].count()


def planner_estimate(queryset: QuerySet[Any]) -> int | None:
    """The planner's row estimate for ``queryset`` on PostgreSQL; ``None`` elsewhere.

    EXPLAIN reads the table statistics (``pg_class.reltuples`` and column histograms), so it
    costs the same on ten rows and on ten million.
    """
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    sql, params = queryset.order_by().query.get_compiler(using=queryset.db).as_sql()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
        (plan,) = cursor.fetchone()
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])
