"""``DatabaseCollector``: the queue's figures read from the database at each scrape."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from django.db import DatabaseError, connections
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from ..ops import metrics

logger = logging.getLogger("django_watchdog.metrics")


class DatabaseCollector:
    """Reads ``ops.metrics`` from database ``using`` on every ``collect()``.

    Gauges only: every process reads the same values, so aggregate them across scrape
    targets with ``max``, never ``sum``. If the database cannot be read, only
    ``watchdog_database_up 0`` is reported (and a warning logged). With
    ``close_connection`` the connection the read opened is closed after it (for threads
    that are not Django requests, e.g. a worker's metrics server).
    """

    def __init__(self, using: str = "default", *, close_connection: bool = False) -> None:
        self.using = using
        self.close_connection = close_connection

    def describe(self) -> list[Metric]:
        """Nothing: registering this collector must not query the database."""
        return []

    def collect(self) -> Iterator[Metric]:
        start = time.perf_counter()
        try:
            snapshot = metrics.read(self.using, now=timezone.now())
        except DatabaseError as error:
            logger.warning("event=metrics_unavailable database=%s error=%r", self.using, error)
            yield _gauge("watchdog_database_up", "Whether the database could be read.", 0)
            return
        finally:
            if self.close_connection:
                connections[self.using].close()
        yield from _families(snapshot)
        yield _gauge("watchdog_database_up", "Whether the database could be read.", 1)
        yield _gauge(
            "watchdog_metrics_read_seconds",
            "Seconds this scrape spent reading the figures from the database.",
            time.perf_counter() - start,
        )


def _families(snapshot: metrics.MetricsSnapshot) -> Iterator[Metric]:
    """One metric family per figure of ``snapshot``."""
    lane = ["lane"]
    queued = GaugeMetricFamily(
        "watchdog_jobs_queued",
        "Queued jobs by lane (waiting their turn, delayed or waiting to retry included).",
        labels=lane,
    )
    ready = GaugeMetricFamily(
        "watchdog_jobs_ready", "Queued jobs a worker may claim now, by lane.", labels=lane
    )
    running = GaugeMetricFamily("watchdog_jobs_running", "Running jobs by lane.", labels=lane)
    oldest = GaugeMetricFamily(
        "watchdog_oldest_ready_job_age_seconds",
        "Seconds since the oldest ready job of the lane was enqueued (lanes with one).",
        labels=lane,
    )
    serving = GaugeMetricFamily(
        "watchdog_lane_live_workers", "Live workers serving the lane.", labels=lane
    )
    settled = GaugeMetricFamily(
        "watchdog_jobs_settled_recent",
        "Jobs settled within the last watchdog_jobs_settled_window_seconds, by lane and outcome.",
        labels=["lane", "outcome"],
    )
    for figures in snapshot.lanes:
        queued.add_metric([figures.lane], figures.queued)
        ready.add_metric([figures.lane], figures.ready)
        running.add_metric([figures.lane], figures.running)
        serving.add_metric([figures.lane], figures.live_workers)
        if figures.oldest_ready_age_s is not None:
            oldest.add_metric([figures.lane], figures.oldest_ready_age_s)
        for outcome, n in sorted(figures.settled.items()):
            settled.add_metric([figures.lane, outcome], n)
    yield from (queued, ready, running, oldest, serving, settled)
    yield _gauge("watchdog_live_workers", "Live workers.", snapshot.live_workers)
    yield _gauge(
        "watchdog_jobs_settled_window_seconds",
        "The window watchdog_jobs_settled_recent counts over.",
        snapshot.settled_window.total_seconds(),
    )
    yield _gauge(
        "watchdog_jobs_settled_scan_cut",
        "1 when watchdog_jobs_settled_recent read only the newest jobs (a busy window).",
        int(snapshot.scan_cut),
    )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
