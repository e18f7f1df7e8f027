"""How many job rows a read takes from the database, by the PostgreSQL planner's count.

``job_rows_read(queries)`` runs ``EXPLAIN (ANALYZE)`` again, afterwards, on each SELECT
Django captured (``CaptureQueriesContext.captured_queries``) and returns, per statement,
the rows its plan took from the job table (``Actual Rows`` and ``Rows Removed by Filter``,
times ``Actual Loops``, of every node that reads ``watchdog_job`` or one of its indexes).
A read that stays flat reads a bounded number
whatever the table holds; a count or a GROUP BY over a state reads every row of it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from django.db import connection

TABLE = "watchdog_job"


def job_rows_read(queries: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Per captured SELECT (PostgreSQL only), the job rows its plan read."""
    assert connection.vendor == "postgresql"
    read: dict[str, int] = {}
    with connection.cursor() as cursor:
        for query in queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith(("SELECT", "WITH")) or TABLE not in sql:
                continue
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql)
            (plan,) = cursor.fetchone()
            if isinstance(plan, str):
                plan = json.loads(plan)
            read[sql] = read.get(sql, 0) + _rows(plan[0]["Plan"])
    return read


def _rows(node: Mapping[str, Any]) -> int:
    # Scans of the table or of one of its indexes name the table (a bitmap's index scan
    # does not: its heap scan counts the rows once).
    own = 0
    if node.get("Relation Name") == TABLE:
        kept_and_dropped = int(node.get("Actual Rows", 0)) + int(
            node.get("Rows Removed by Filter", 0)
        )
        own = kept_and_dropped * int(node.get("Actual Loops", 1))
    return own + sum(_rows(child) for child in node.get("Plans", ()))
