"""The public verbs of SPEC §5: validate every argument, then call the store."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import router

from .domain import reruns, validation
from .domain.errors import InvalidInput
from .domain.retries import RetryPolicy
from .domain.states import default_cancellation_id
from .domain.values import CancelResult, EnqueueResult, LaneFailure, QueueHead, SettledRecord
from .tracing import enqueue_span
from .twins import async_twin

if TYPE_CHECKING:
    from .models import Job
    from .store.enqueue import NewJob
    from .store.store import Store

MAX_FEED_LIMIT = 10_000


def _alias(using: object) -> str:
    from django.db import connections

    from .models import Job

    if using is None:
        return router.db_for_write(Job)
    if not isinstance(using, str) or using not in connections:
        raise InvalidInput("using", f"{using!r} is not a configured database alias")
    return using


def _store(using: object) -> Store:
    """The store on the alias ``using`` (checked). Imported here, not at the top, so
    ``import django_watchdog`` works before Django's app registry is ready."""
    from .store.store import Store

    return Store(_alias(using))


#: ``enqueue()``'s lane, and an ``enqueue_many`` item's when it names none.
DEFAULT_LANE = "default"


def enqueue(
    job_id: str,
    *,
    queue: str,
    lane: str = DEFAULT_LANE,
    priority: int = 0,
    payload: Any = None,
    max_recoveries: int | None = None,
    run_after: datetime | None = None,
    retry: RetryPolicy | None = None,
    timeout: float | None = None,
    using: str | None = None,
) -> EnqueueResult:
    """Add a job, joining the caller's transaction; an identical repeat is a ``duplicate``.

    ``run_after`` (aware datetime) delays the job: it enters its queue's order then, and
    blocks nothing until then. ``retry`` and ``timeout`` override the lane handler's.
    Raises ``InvalidInput`` for a bad argument and ``JobConflict`` when ``job_id`` exists
    with a different queue, lane, priority, payload, recovery policy, delay, retry or timeout.
    """
    from .store.enqueue import NewJob

    with enqueue_span() as span:
        new = NewJob.parse(
            job_id,
            queue=queue,
            lane=lane,
            priority=priority,
            payload=payload,
            max_recoveries=max_recoveries,
            run_after=run_after,
            retry=retry,
            timeout=timeout,
            trace_context=span.context,
        )
        result = _store(using).enqueue(new)
        span.enqueued([result])
        return result


ENQUEUE_FIELDS = frozenset(
    {
        "job_id",
        "queue",
        "lane",
        "priority",
        "payload",
        "max_recoveries",
        "run_after",
        "retry",
        "timeout",
    }
)
MAX_BULK = 10_000


def enqueue_many(
    jobs: Iterable[Mapping[str, Any]], *, using: str | None = None
) -> list[EnqueueResult]:
    """Enqueue many jobs in one transaction, all or nothing; results in the same order.

    Each item holds ``enqueue()``'s arguments (``job_id`` and ``queue`` required). A bad
    item raises ``InvalidInput`` naming it (``jobs[3].priority``) before anything is
    written; a ``JobConflict`` rolls the whole batch back.
    """
    if isinstance(jobs, Mapping | str | bytes):
        raise InvalidInput("jobs", "must be an iterable of mappings, one per job")
    with enqueue_span() as span:
        batch = _parse_many(jobs, span.context)
        if not batch:
            return []
        results = _store(using).enqueue_many(batch)
        span.enqueued(results)
        return results


def _parse_many(jobs: Iterable[Mapping[str, Any]], context: dict[str, str] | None) -> list[NewJob]:
    """``enqueue_many``'s items, validated, each with the trace ``context``."""
    from .conf import setting
    from .store.enqueue import NewJob

    cap = int(setting("MAX_PAYLOAD_BYTES"))  # read once, not per job
    batch = []
    for index, item in enumerate(jobs):
        if index >= MAX_BULK:
            raise InvalidInput("jobs", f"holds more than {MAX_BULK} jobs; split the batch")
        # A dict is a Mapping: the common case spares the ABC's check.
        if type(item) is not dict and not isinstance(item, Mapping):
            raise InvalidInput(f"jobs[{index}]", f"must be a mapping, not {type(item).__name__}")
        if not ENQUEUE_FIELDS.issuperset(item) or "job_id" not in item or "queue" not in item:
            unknown = set(item) - ENQUEUE_FIELDS
            problem = f"unknown keys {sorted(unknown)}" if unknown else "needs job_id and queue"
            raise InvalidInput(f"jobs[{index}]", problem)
        get = item.get
        try:
            batch.append(
                NewJob.parse(
                    item["job_id"],
                    queue=item["queue"],
                    lane=get("lane", DEFAULT_LANE),
                    priority=get("priority", 0),
                    payload=get("payload"),
                    max_recoveries=get("max_recoveries"),
                    run_after=get("run_after"),
                    retry=get("retry"),
                    timeout=get("timeout"),
                    trace_context=context,
                    max_payload_bytes=cap,
                )
            )
        except InvalidInput as error:
            raise InvalidInput(f"jobs[{index}].{error.field}", error.problem) from error
    return batch


def cancel(
    job_id: str,
    *,
    cancellation_id: str | None = None,
    only_if_queued: bool = False,
    requested_by: str | None = None,
    using: str | None = None,
) -> CancelResult:
    """Record an intent to cancel ``job_id``, and who asked (``requested_by``, 1–150 chars).

    Returns ``recorded``, ``replayed`` (same intent again), ``conflict`` (another intent, or
    ``only_if_queued`` and the job is not queued) or ``missing``.
    """

    job_id = validation.identifier(job_id, "job_id")
    if cancellation_id is None:
        cancellation_id = default_cancellation_id(job_id)
    else:
        cancellation_id = validation.identifier(cancellation_id, "cancellation_id")
    only_if_queued = validation.flag(only_if_queued, "only_if_queued")
    requested_by = reruns.requester(requested_by)
    return _store(using).cancel(
        job_id, cancellation_id, only_if_queued=only_if_queued, requested_by=requested_by
    )


def rerun(
    job_id: str,
    *,
    rerun_id: str | None = None,
    requested_by: str | None = None,
    using: str | None = None,
) -> EnqueueResult:
    """Enqueue settled job ``job_id`` again as a new job linked to it (``rerun_of``).

    Only a job settled ``failed``, ``interrupted`` or ``cancelled`` can be re-run; anything
    else raises ``InvalidInput`` naming it. The new job has the original's queue, lane,
    priority, payload, recovery policy, retry policy and timeout. Its id is ``rerun_id``,
    or ``<job_id>~rerun-<n>`` for the next number ``n``; a repeat with the same id returns
    ``duplicate`` and the same job. The original is not changed.
    """

    job_id = validation.identifier(job_id, "job_id")
    if rerun_id is not None:
        rerun_id = validation.identifier(rerun_id, "rerun_id")
    requested_by = reruns.requester(requested_by)
    return _store(using).rerun(job_id, rerun_id=rerun_id, requested_by=requested_by)


def get_job(job_id: str, *, using: str | None = None) -> Job | None:
    """The job named ``job_id``, or ``None``."""
    from .models import Job

    job_id = validation.identifier(job_id, "job_id")
    return Job.objects.using(_alias(using)).filter(job_id=job_id).first()


def queue_head(queue: str, *, using: str | None = None) -> QueueHead:
    """What ``queue`` shows now: ``idle``, its next ``queued`` job, or its ``running`` job."""

    queue = validation.identifier(queue, "queue")
    return _store(using).queue_head(queue)


def latest_settled(queue: str, *, using: str | None = None) -> Job | None:
    """The job of ``queue`` that settled last, or ``None``."""

    queue = validation.identifier(queue, "queue")
    return _store(using).latest_settled(queue)


def settled_jobs(
    after: str | None = None,
    limit: int = 256,
    *,
    lane: str | None = None,
    exclude_lane: str | None = None,
    using: str | None = None,
) -> list[SettledRecord]:
    """Settled jobs after the cursor ``after``, never past the partition's first pending job.

    Reading on from each last ``cursor`` yields every settled job exactly once.
    """

    position = validation.cursor(after)
    limit = validation.integer(limit, "limit", minimum=1, maximum=MAX_FEED_LIMIT)
    if lane is not None and exclude_lane is not None:
        raise InvalidInput("exclude_lane", "give lane or exclude_lane, not both")
    lanes = (validation.lane(lane),) if lane is not None else ()
    excluded = (validation.lane(exclude_lane, "exclude_lane"),) if exclude_lane is not None else ()
    return _store(using).settled_jobs(position, limit, lanes=lanes, exclude_lanes=excluded)


def fail_lane(lane: str, reason: str, *, using: str | None = None) -> LaneFailure:
    """Settle up to 256 pending jobs of ``lane`` ``failed``; ``.more`` if any remain."""

    lane = validation.lane(lane)
    reason = validation.reason(reason)
    return _store(using).fail_lane(lane, reason)


def purge_queued(queue: str, *, using: str | None = None) -> int:
    """Delete ``queue``'s queued jobs; running and settled jobs stay. Return the count."""
    queue = validation.identifier(queue, "queue")
    return _store(using).purge_queued(queue)


# The async twins (for async views): each runs its sync verb in the connection's thread.
aenqueue = async_twin(enqueue)
aenqueue_many = async_twin(enqueue_many)
acancel = async_twin(cancel)
aget_job = async_twin(get_job)
aqueue_head = async_twin(queue_head)
