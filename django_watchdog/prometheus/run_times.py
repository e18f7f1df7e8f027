"""``RunTimes``: how long one worker process's handlers ran, heard from its lifecycle signals."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Gauge, Histogram

from ..signals import job_finished, job_started

#: Seconds: from a quick job to an hour-long one.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)


class RunTimes:
    """Per-process metrics (``watchdog_worker_*``), fed by ``job_started`` and
    ``job_finished`` once ``connect()``-ed, so the worker runs the handlers as registered
    (a receiver connected with ``sender=handler`` still hears them).

    A run is observed when its ``job_finished`` is sent (``ended="returned"|"raised"``:
    whether the handler raised), a retry's each attempt apart, with the handler's run time;
    a run abandoned after its timeout is observed when the worker gives it up. Each worker
    process has its own: sum them across workers.
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
        self._uid = f"django_watchdog.prometheus.run_times.{id(self)}"

    def connect(self) -> None:
        """Start measuring this process's runs."""
        job_started.connect(self._started, weak=False, dispatch_uid=self._uid)
        job_finished.connect(self._finished, weak=False, dispatch_uid=self._uid)

    def disconnect(self) -> None:
        """Stop measuring."""
        job_started.disconnect(dispatch_uid=self._uid)
        job_finished.disconnect(dispatch_uid=self._uid)

    def _started(self, sender: Any, *, job: Any, **named: Any) -> None:
        self.in_progress.labels(job.lane).inc()

    def _finished(
        self, sender: Any, *, job: Any, duration: float, exception: Any, **named: Any
    ) -> None:
        self.in_progress.labels(job.lane).dec()
        ended = "returned" if exception is None else "raised"
        self.seconds.labels(job.lane, ended).observe(duration)
