"""Single-job execution: a job thread runs a job, settles it and claims the next in the
same transaction, and goes on until none is ready (or the worker stops).

Without job threads (``start(threads=False)``, the step-by-step mode of tests) each job
runs to settlement in the caller's thread and claims nothing on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from ..domain.errors import WatchdogError
from ..domain.values import ClaimResult
from . import events
from .claiming import Claimer
from .clock import Clock
from .deciding import Decider
from .holdings import Holdings
from .running import RunningJob
from .settling import Settler, announce_settle
from .threads import JobThreads


class Runner:
    """What running claimed jobs takes; shared by single-job and batch execution."""

    def __init__(
        self,
        *,
        holdings: Holdings,
        claimer: Claimer,
        decider: Decider,
        settler: Settler,
        threads: JobThreads,
        clock: Clock,
        wake: threading.Event,
        wants_work: Callable[[], bool],
    ) -> None:
        self.holdings = holdings
        self.claimer = claimer
        self.decider = decider
        self.settler = settler
        self.threads = threads
        self.clock = clock
        self.wake = wake
        self.wants_work = wants_work
        #: Whether jobs run in job threads (and claim on); set by the worker's ``start``.
        self.threaded = False


class JobRunner(Runner):
    """Runs claimed jobs one at a time per job thread, chaining claims as they settle."""

    def dispatch(self, running: RunningJob) -> None:
        """Run ``running`` in a job thread (or here, to settlement, without threads)."""
        if not self.threaded:
            self.run_chain(running)
            return
        self.holdings.track(running)
        self.threads.submit(self._job_thread, running)

    def _job_thread(self, first: RunningJob) -> None:
        try:
            self.run_chain(first, tracked=True)
        finally:
            self.wake.set()

    def run_chain(self, first: RunningJob, *, tracked: bool = False) -> None:
        """Run ``first``, then each job claimed along with the previous settle.

        Never raises: whatever escapes a run, its job is settled ``failed`` (the thread
        must not die holding a ``running`` job). A job claimed on while a stop was being
        requested is released unstarted.
        """
        current: RunningJob | None = first
        while current is not None:
            following: RunningJob | None = None
            try:
                outcome = self._execute(current, chain=self.threaded)
                if isinstance(outcome, WatchdogError):
                    events.claim_skipped(outcome)
                elif outcome is not None:
                    following = self.claimer.accept(outcome)
                if following is not None and not self.wants_work():
                    self.settler.release_unstarted([following])
                    following = None
            except Exception as error:  # noqa: BLE001 - the job must still settle
                self.settler.settle_worker_error(current, error)
                following = None
            finally:
                if tracked:
                    self.holdings.hand_over(current, following)
            current = following
            if tracked and following is not None and following.deadline is not None:
                self.wake.set()  # the main loop watches deadlines: it must see this one

    def _execute(self, running: RunningJob, *, chain: bool) -> ClaimResult | WatchdogError | None:
        """Run the lane's handler and settle its decision; with ``chain``, claim the next
        job in the same transaction, unless a stop was requested while the handler ran."""
        started = self.clock.monotonic()
        decision = self.decider.decide(running)
        if decision is None:
            return None
        ran = self.clock.monotonic() - started  # the handler's time, not the settle's
        claim_next = self.claimer.partition if chain and self.wants_work() else None
        settled, claimed = self.settler.settle(running, decision, claim_next)
        announce_settle(running, decision, settled, ran)
        return claimed
