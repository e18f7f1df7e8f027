"""What a test enqueued, read without running it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..api import _alias
from ..domain import validation
from ..domain.states import State

if TYPE_CHECKING:
    from ..models import Job


def enqueued_jobs(
    *,
    queue: str | None = None,
    lane: str | None = None,
    job_id: str | None = None,
    using: str | None = None,
) -> list[Job]:
    """The jobs waiting to run (queued, delayed or waiting to retry) that match every
    filter given, in the order they were enqueued."""
    from ..models import Job

    filters: dict[str, Any] = {"state": State.QUEUED}
    if queue is not None:
        filters["queue"] = validation.identifier(queue, "queue")
    if lane is not None:
        filters["lane"] = validation.lane(lane)
    if job_id is not None:
        filters["job_id"] = validation.identifier(job_id, "job_id")
    return list(Job.objects.using(_alias(using)).filter(**filters).order_by("pk"))


@contextmanager
def capture_enqueued(*, using: str | None = None) -> Iterator[list[Job]]:
    """Yield a list that, when the block ends, holds the jobs enqueued inside it (in any
    state by then), in the order they were enqueued. A ``duplicate`` enqueue adds none."""
    from ..models import Job

    jobs = Job.objects.using(_alias(using))
    last = jobs.order_by("-pk").values_list("pk", flat=True).first() or 0
    captured: list[Job] = []
    yield captured
    captured.extend(jobs.filter(pk__gt=last).order_by("pk"))
