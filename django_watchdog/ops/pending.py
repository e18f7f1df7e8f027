"""Pending jobs per lane, read flat on big tables: what ``watchdog status``, the dashboard
and the metrics show of each lane's backlog.

Lanes with pending work are found one index probe each (a skip scan of the pending jobs'
``lane_pending`` index); each lane's queued and running jobs are counted exactly up to a
cap by the same index, past it the planner's estimate where the database offers one
(``estimates.count_or_estimate``). A million queued jobs cost what the cap does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..domain.states import State
from ..store import estimates

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from ..models import Job

#: Pending jobs of a lane and state are counted exactly up to this many.
COUNT_CAP = 10_000
#: Lanes with pending work read at most.
LANES_SHOWN = 100
#: The order of the index the counts walk (``lane_pending``).
LANE_PENDING_ORDER = ("lane", "state", "id")


#: How a count past its cap reads: the planner's estimate, or at least the cap.
ESTIMATED, AT_LEAST = "~", "+"


@dataclass(frozen=True, kw_only=True)
class LanePending:
    """One lane's queued and running jobs. A mark per count: ``""`` exact, ``ESTIMATED``
    past the cap (the planner's estimate), ``AT_LEAST`` past the cap where the database
    estimates nothing and counting on was not asked for (then the count is the cap)."""

    queued: int
    running: int
    queued_mark: str = ""
    running_mark: str = ""

    @property
    def exact(self) -> bool:
        return not (self.queued_mark or self.running_mark)

    def shown(self, state: State) -> str:
        """The count of ``state`` as text: ``~12000``, ``10000+`` or ``42``."""
        if state == State.QUEUED:
            count, mark = self.queued, self.queued_mark
        else:
            count, mark = self.running, self.running_mark
        return f"{count}+" if mark == AT_LEAST else f"{mark}{count}"


def by_lane(
    jobs: QuerySet[Job],
    *,
    cap: int | None = None,
    lanes: int | None = None,
    count_on: bool = True,
) -> dict[str, LanePending]:
    """Per lane with pending jobs (up to ``lanes`` of them, in name order), its queued and
    running jobs: one probe per lane, two counts of at most ``cap`` rows each, then the
    planner's estimate or, without one, an exact count if ``count_on`` (else the cap).
    ``cap`` and ``lanes`` default to ``COUNT_CAP`` and ``LANES_SHOWN``."""
    cap = COUNT_CAP if cap is None else cap
    shown = LANES_SHOWN if lanes is None else lanes
    found: dict[str, LanePending] = {}
    for lane in estimates.distinct_values(pending_jobs(jobs), "lane", shown):
        queued = _count(_of(jobs, lane, State.QUEUED), cap, count_on)
        running = _count(_of(jobs, lane, State.RUNNING), cap, count_on)
        found[lane] = LanePending(
            queued=queued[0], running=running[0], queued_mark=queued[1], running_mark=running[1]
        )
    return found


def pending_jobs(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """``jobs`` that are pending, by the ``lane_pending`` index's own condition
    (``models.PENDING_JOBS``, a term without parameters): SQLite uses a partial index only
    when the query repeats its condition with the same constants, and the ORM binds
    ``state__in`` values as parameters (a lane probe then scanned the table: 0.7 s at
    1,300,000 rows)."""
    from ..models import PENDING_JOBS

    return jobs.filter(PENDING_JOBS)


def _of(jobs: QuerySet[Job], lane: str, state: State) -> QuerySet[Job]:
    """The jobs of ``lane`` in ``state``, by the ``lane_pending`` index (``pending_jobs``,
    its predicate after the equalities: before them SQLite sorted every match)."""
    return pending_jobs(jobs.filter(lane=lane, state=state))


def _count(part: QuerySet[Job], cap: int, count_on: bool) -> tuple[int, str]:
    """``part`` counted up to ``cap`` by the ``lane_pending`` index, then as ``by_lane``
    says; the count and its mark."""
    counted = estimates.bounded_count(part, cap, LANE_PENDING_ORDER)
    if counted <= cap:
        return counted, ""
    estimate = estimates.planner_estimate(part)
    if estimate is not None:
        return max(estimate, counted), ESTIMATED
    if count_on:
        return part.order_by().count(), ""
    return cap, AT_LEAST
