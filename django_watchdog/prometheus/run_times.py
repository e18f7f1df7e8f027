"""``RunTimes``: how long one worker process's handlers ran, measured around each call."""

from __future__ import annotations

import functools
import inspect
import time
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Histogram

from ..handlers import HandlerFunction

#: Seconds: from a quick job to an hour-long one.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)


class RunTimes:
    """Per-process metrics (``watchdog_worker_*``), fed by wrapping the worker's handlers.

    A handler call is observed when it returns or raises (``ended="returned"|"raised"``),
    a retry's each attempt apart; a handler abandoned after its timeout is observed when
    it finally ends. Each worker process has its own: sum them across workers.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.seconds = Histogram(
            "watchdog_worker_job_run_seconds",
            "Seconds a handler of this worker process ran, by lane and how it ended.",
            ["lane", "ended"],
            registry=registry,
            buckets=BUCKETS,
        )
        self.in_progress = Gauge(
            "watchdog_worker_jobs_in_progress",
            "Handlers of this worker process running now, by lane.",
            ["lane"],
            registry=registry,
        )

    def wrap_all(self, handlers: Mapping[str, HandlerFunction]) -> dict[str, HandlerFunction]:
        """``handlers`` with every function measured."""
        return {lane: self.wrap(lane, function) for lane, function in handlers.items()}

    def wrap(self, lane: str, function: HandlerFunction) -> HandlerFunction:
        """``function``, measured under ``lane`` (a coroutine function stays one)."""
        if inspect.iscoroutinefunction(function):
            return self._wrap_async(lane, function)

        @functools.wraps(function)
        def measured(job: Any) -> Any:
            with _Measure(self, lane):
                return function(job)

        return measured

    def _wrap_async(self, lane: str, function: Callable[[Any], Any]) -> HandlerFunction:
        @functools.wraps(function)
        async def measured(job: Any) -> Any:
            with _Measure(self, lane):
                return await function(job)

        return measured


class _Measure:
    """Counts a call in progress and observes its duration and how it ended."""

    def __init__(self, run_times: RunTimes, lane: str) -> None:
        self.run_times = run_times
        self.lane = lane
        self.start = 0.0

    def __enter__(self) -> None:
        self.run_times.in_progress.labels(self.lane).inc()
        self.start = time.perf_counter()

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        elapsed = time.perf_counter() - self.start
        self.run_times.in_progress.labels(self.lane).dec()
        ended = "returned" if kind is None else "raised"
        self.run_times.seconds.labels(self.lane, ended).observe(elapsed)
