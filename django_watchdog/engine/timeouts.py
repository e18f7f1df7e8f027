"""Per-job timeouts, enforced from the main loop.

Past a job's deadline its ``cancel_requested`` turns on (a cooperative handler stops and the
job settles ``failed`` with a ``TimeoutError`` reason). Past the deadline plus the grace the
worker gives up on the run: it settles the job ``outcome_unknown`` (the handler may still be
changing things), frees its slot, and discards the abandoned thread's eventual result. A
batch stuck behind that run is flushed, so the rest of it does not wait.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..domain.states import Outcome
from ..domain.values import Decision
from ..store.worker_store import LockBusy
from . import events
from .batches import Batch
from .clock import Clock
from .holdings import Holdings
from .options import WorkerOptions
from .running import RunningJob
from .settling import Settler, announce_settle


class Timeouts:
    """Watches the deadlines of this worker's runs. Main thread only."""

    def __init__(
        self,
        *,
        holdings: Holdings,
        settler: Settler,
        clock: Clock,
        options: WorkerOptions,
        flush: Callable[[Batch], object],
        deferrals: events.Deferrals,
    ) -> None:
        self.holdings = holdings
        self.settler = settler
        self.clock = clock
        self.options = options
        self._flush = flush
        self._deferrals = deferrals
        #: Abandoned runs whose settle waits for their queue's lock (tried every pass).
        self._unsettled: list[RunningJob] = []

    def enforce(self) -> None:
        """Past a job's deadline turn ``cancel_requested`` on; past the grace, give up on it."""
        now = self.clock.monotonic()
        grace = self.options.timing("timeout_grace")
        unsettled, self._unsettled = self._unsettled, []
        running_now = [r for r in self.holdings.running_jobs() if r not in unsettled]
        for running in unsettled + running_now:
            if running.deadline is None or now < running.deadline:
                continue
            if not running.timed_out:
                events.log(
                    logging.WARNING,
                    "timeout",
                    **events.job(running),
                    timeout_s=running.timeout,
                )
                running.timed_out = True
                running.request_cancel()
            if now >= running.deadline + grace and (not running.abandoned or running in unsettled):
                self._abandon(running, grace)

    def _abandon(self, running: RunningJob, grace: float) -> None:
        running.abandoned = True
        decision = Decision(
            outcome=Outcome.OUTCOME_UNKNOWN,
            traceback=f"Timed out after {running.timeout} s and did not stop within "
            f"{grace} s; the run was abandoned while still executing.",
        )
        try:
            settled, _ = self.settler.settle(running, decision, None, defer_if_busy=True)
        except LockBusy:
            # Its queue is held by another transaction: settle on a later pass (the
            # abandoned run may leave the running set meanwhile; keep it here).
            self._unsettled.append(running)
            self._deferrals.deferred("settle_timed_out", running.job_id)
            return
        self._deferrals.done("settle_timed_out", running.job_id)
        stuck = self.holdings.abandon(running)
        announce_settle(running, decision, settled, running.timeout or 0.0)
        for batch in stuck:
            batch.stuck = True
            self._flush(batch)  # the rest of it must not wait on this one

    def next_deadline(self) -> float | None:
        """The earliest deadline (monotonic) of a running job, if any has one."""
        deadlines = [r.deadline for r in self.holdings.running_jobs() if r.deadline is not None]
        return min(deadlines) if deadlines else None
