"""Running a lane's handler and turning what it did into a ``Decision`` (SPEC §4.6).

Shared by single-job and batch execution. A failure is retried when the job's retry policy
(its own, else its lane's) says so; a run the timeouts gave up on decides nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ..domain import decisions
from ..domain.errors import WatchdogError
from ..domain.retries import RetryPolicy
from ..domain.states import Outcome
from ..domain.values import Decision
from . import coroutines, events, hooks, tracing
from .clock import Clock
from .ports import LaneOptions
from .running import RunningJob
from .settling import worker_error_decision

Handler = Callable[[RunningJob], Any]


def timed_out(running: RunningJob) -> Decision:
    """A run that stopped (returned, or its coroutine was cancelled) after its timeout."""
    return Decision.failed(f"TimeoutError: stopped after its {running.timeout} s timeout")


class Decider:
    """Runs handlers; knows each served lane's handler and options. Thread-safe."""

    def __init__(
        self,
        handlers: Mapping[str, Handler],
        lane_options: Mapping[str, LaneOptions],
        clock: Clock,
    ) -> None:
        self.handlers = dict(handlers)
        self.lane_options = dict(lane_options)
        self.clock = clock

    def timeout(self, lane: str) -> float | None:
        """The lane's default timeout (a job's own one wins over it)."""
        options = self.lane_options.get(lane)
        return None if options is None else options.timeout

    def decide(self, running: RunningJob) -> Decision | None:
        """Run the lane's handler: its decision, or ``None`` if the run was abandoned.

        An ``async def`` handler runs in an event loop of its own in this thread; a
        cancellation intent or the timeout cancels its task (engine/coroutines.py).
        """
        handler = self.handlers[running.lane]
        warning = None
        hooks.started(running, handler)
        try:
            with tracing.current(running.span):
                value = coroutines.run_to_end(handler(running), running)
        except BaseException as error:  # noqa: BLE001 - every failure is the job's outcome
            if not coroutines.stopped(error, running):  # the worker's own cancellation
                running.error = error
            decision = self._decide_failure(running, error)
        else:
            try:
                decision, warning = decisions.from_return(value)
            except Exception as error:  # noqa: BLE001 - a result must not kill the thread
                decision = worker_error_decision(error)
            if running.timed_out:
                decision = timed_out(running)
        if running.abandoned:
            events.log(
                logging.WARNING,
                "abandoned_run_returned",
                **events.job(running),
                discarded=decision.outcome.value,
            )
            return None
        if warning:
            events.log(logging.WARNING, "result_dropped", job_id=running.job_id, detail=warning)
        return decision

    def _decide_failure(self, running: RunningJob, error: BaseException) -> Decision:
        if coroutines.stopped(error, running):
            # The worker cancelled the coroutine: for its timeout, or a cancellation intent.
            return timed_out(running) if running.timed_out else Decision(outcome=Outcome.CANCELLED)
        decision = decisions.after_failure(
            error,
            policy=self._retry_policy(running),
            attempts=running.attempts,
            cancel_requested=running.cancel_requested,
            now=self.clock.now(),
        )
        # The settle's line says whether this was final (ERROR, with the traceback) or
        # will be retried (WARNING): this one only records the attempt.
        events.log(
            logging.INFO,
            "handler_raised",
            **events.job(running),
            attempt=running.attempts,
            reason=decision.failure_reason or type(error).__name__,
            retry_at=decision.retry_at.isoformat() if decision.retry_at else None,
        )
        logging.getLogger("django_watchdog.handler").debug(
            "job %s raised:\n%s", running.job_id, decision.traceback
        )
        return decision

    def _retry_policy(self, running: RunningJob) -> RetryPolicy | None:
        stored = running.model.retry_policy
        if stored is not None:
            try:
                return RetryPolicy.from_json(stored)
            except WatchdogError as error:
                events.log(
                    logging.ERROR, "retry_policy_invalid", job_id=running.job_id, error=str(error)
                )
                return None
        options = self.lane_options.get(running.lane)
        return None if options is None else options.retry
