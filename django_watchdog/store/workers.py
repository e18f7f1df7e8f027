"""Worker rows: registration, heartbeats, and what a worker re-reads about its running jobs."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import NamedTuple

from django.db import transaction

from ..domain.states import State
from ..models import PENDING_JOBS, Job, Worker
from . import deadlocks, estimates
from .clock import DatabaseClock
from .dialects import dialect


class Registered(NamedTuple):
    """A worker row as the same host's liveness check reads it."""

    worker_id: str
    pid: int
    started_at: datetime


def register(
    using: str,
    worker_id: str,
    *,
    started_at: datetime,
    lanes: Sequence[str],
    exclude_lanes: Sequence[str],
    concurrency: int,
) -> None:
    """Create or refresh this process's ``Worker`` row, its heartbeat on the database's clock.

    ``started_at`` is when the worker's process started (on its host's clock): with the pid,
    it tells a live worker from another process that was given the same pid later.
    """

    described = {
        "host": socket.gethostname()[:255],
        "pid": os.getpid(),
        "lanes": list(lanes),
        "exclude_lanes": list(exclude_lanes),
        "concurrency": concurrency,
        "heartbeat_at": DatabaseClock(),
    }
    Worker.objects.using(using).update_or_create(
        worker_id=worker_id,
        defaults=described,
        create_defaults={**described, "started_at": started_at},
    )


@deadlocks.retried
def heartbeat(using: str, worker_id: str) -> bool:
    """Mark the worker alive now, on the database's clock, in one statement (the caller's
    transaction, or its own); ``False`` if its row is gone (another worker reaped it)."""

    return dialect(using).heartbeat(worker_id)


def deregister(using: str, worker_id: str) -> None:

    Worker.objects.using(using).filter(worker_id=worker_id).delete()


def reap(using: str, *, timeout: float) -> int:
    """Delete rows of workers silent for ten timeouts (on the database's clock) and running
    nothing; return how many."""

    with transaction.atomic(using=using):
        busy = Job.objects.using(using).filter(state=State.RUNNING).values("claimed_by")
        deleted, _ = (
            Worker.objects.using(using)
            .filter(heartbeat_at__lt=DatabaseClock(10 * timeout))
            .exclude(worker_id__in=busy)
            .delete()
        )
    return deleted


def cancellations(using: str, job_ids: Iterable[str]) -> set[str]:
    """Which of ``job_ids`` have a recorded cancellation intent."""

    ids = list(job_ids)
    if not ids:
        return set()
    return set(
        Job.objects.using(using)
        .filter(job_id__in=ids, cancellation_id__isnull=False)
        .values_list("job_id", flat=True)
    )


#: Lanes with queued jobs a starting worker looks at, at most.
LANES_LOOKED_AT = 1_000


def lanes_without_handler(using: str, handled: Sequence[str]) -> list[str]:
    """Lanes with queued jobs that no handler in ``handled`` serves: the queued jobs'
    lanes, one index probe each (a skip scan), never a DISTINCT over every queued job."""
    queued = Job.objects.using(using).filter(PENDING_JOBS, state=State.QUEUED)
    served = set(handled)
    return [
        lane
        for lane in estimates.distinct_values(queued, "lane", LANES_LOOKED_AT)
        if lane not in served
    ]


def on_host(using: str, host: str) -> list[Registered]:
    """The workers registered from ``host``: (worker id, pid, process start)."""

    return [
        Registered(worker_id, pid, started_at)
        for worker_id, pid, started_at in Worker.objects.using(using)
        .filter(host=host)
        .values_list("worker_id", "pid", "started_at")
    ]
