"""How long an admin page or a scrape on a large table may take: a budget that grows with
the machine's load, so a busy CI machine does not fail a page that reads what it should,
while a page that scans the table still fails on a quiet one."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

#: Seconds a page may take on an idle machine (the figures in the project notes are a few
#: hundred milliseconds with 1,000,000 rows, on two cores).
PAGE_BUDGET = 3.0


def page_budget() -> float:
    """``PAGE_BUDGET`` times how many runnable tasks share each core over the last minute
    (at least 1): with ten tasks on two cores a page gets a fifth of a core."""
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    return PAGE_BUDGET * max(1.0, per_core)


def fastest(render: Callable[[], object], repeat: int = 5) -> tuple[float, float]:
    """The fastest of ``repeat`` calls of ``render`` in seconds (a slow call is the machine's
    doing; a slow page is slow every time), and the budget for it, read as they ran."""
    seconds = []
    budget = page_budget()
    for _ in range(repeat):
        start = time.perf_counter()
        render()
        seconds.append(time.perf_counter() - start)
        budget = max(budget, page_budget())
    return min(seconds), budget
