"""A paginator that never counts a whole table: exact for small results, estimated past that."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.utils.functional import cached_property

from ..store import estimates

#: Results up to this many rows are counted exactly; larger ones are estimated.
EXACT_COUNT_LIMIT = 10_000


class EstimatedCountPaginator(Paginator):  # type: ignore[type-arg]
    """Count at most ``EXACT_COUNT_LIMIT + 1`` rows; estimate larger results.

    On PostgreSQL and MariaDB the estimate is the planner's (``EXPLAIN``). Elsewhere
    (SQLite, one machine) the exact count is taken. An estimate that is too high only shows
    an empty last page; the admin's pagination template marks estimated totals with "about".
    """

    @cached_property
    def count(self) -> int:
        object_list: Any = self.object_list
        if not hasattr(object_list, "query"):
            return len(object_list)
        counted = estimates.bounded_count(object_list, EXACT_COUNT_LIMIT)
        if counted <= EXACT_COUNT_LIMIT:
            return counted
        estimate = estimates.planner_estimate(object_list)
        if estimate is None:
            return int(object_list.count())
        self.estimated = True
        return max(estimate, counted)

    estimated = False
