"""Enqueue: insert a job once per ``job_id``, idempotently (SPEC §4.1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from ..conf import setting
from ..domain import validation
from ..domain.errors import InvalidInput, JobConflict
from ..domain.retries import RetryPolicy
from ..domain.values import EnqueueResult
from ..models import Job, Queue
from . import deadlocks, heads, pruned_ids
from .dialects import dialect
from .written import Written


@dataclass(kw_only=True, slots=True)
class NewJob:
    """A validated enqueue request, made by ``parse`` and never changed after;
    ``payload_json`` is its payload's compact text (what the size cap counts, and what a
    JSON column of text stores). A repeat is a duplicate when the stored payload is the
    same JSON value (``validation.json_identity``: numbers compare as numbers).
    ``trace_context`` is the enqueuing code's trace context (``django_watchdog.tracing``),
    stored with the job but no part of its identity: a repeat from another request is
    still a duplicate.

    Not frozen: a frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, and that cost a bulk enqueue of 2,000 jobs into SQLite 8 % of
    its instructions (``valgrind --tool=callgrind``: 227,600 a job, 209,600 unfrozen)."""

    job_id: str
    queue: str
    lane: str
    priority: int
    payload: Any
    payload_json: str
    max_recoveries: int | None
    run_after: datetime | None = None
    retry: RetryPolicy | None = None
    timeout: float | None = None
    trace_context: dict[str, str] | None = None

    @classmethod
    def parse(
        cls,
        job_id: object,
        *,
        queue: object,
        lane: object,
        priority: object,
        payload: object,
        max_recoveries: object,
        run_after: object = None,
        retry: object = None,
        timeout: object = None,
        max_payload_bytes: int | None = None,
        cap_name: str = "WATCHDOG['MAX_PAYLOAD_BYTES']",
        trace_context: dict[str, str] | None = None,
    ) -> NewJob:
        """Validate an enqueue request; the payload cap is ``WATCHDOG['MAX_PAYLOAD_BYTES']``
        unless ``max_payload_bytes`` (named ``cap_name`` in the error) replaces it.
        ``trace_context`` comes from the tracing glue, not from the caller: kept as given."""
        if max_payload_bytes is None:
            max_payload_bytes = int(setting("MAX_PAYLOAD_BYTES"))
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise InvalidInput(
                "retry", f"must be a RetryPolicy or None, not {type(retry).__name__}"
            )
        # Made as ``cls(...)`` would make it, in half the time: called with keywords, a
        # class packs them into a dict for its ``__init__`` (Python 3.12: 860 ns for these
        # 11, against 380 for ``__new__`` and a direct call of ``__init__``).
        new = object.__new__(cls)
        new.__init__(  # type: ignore[misc]
            job_id=validation.identifier(job_id, "job_id"),
            queue=validation.identifier(queue, "queue"),
            lane=validation.lane(lane),
            priority=validation.priority(priority),
            payload=payload,
            payload_json=validation.compact_json(
                payload, "payload", max_bytes=max_payload_bytes, cap_name=cap_name
            ),
            # Each is most often None, which its check passes as it is: no call for it.
            max_recoveries=(
                None if max_recoveries is None else validation.max_recoveries(max_recoveries)
            ),
            run_after=(
                None if run_after is None else validation.aware_datetime(run_after, "run_after")
            ),
            retry=retry,
            timeout=None if timeout is None else validation.seconds(timeout, "timeout"),
            trace_context=trace_context,
        )
        return new

    @property
    def payload_identity(self) -> Any:
        """What a stored payload must equal for a repeat to be a duplicate."""
        return validation.json_identity(self.payload)

    def differences(self, job: Job) -> list[str]:
        """Fields in which ``job`` differs from this request, in contract order."""
        pairs = (
            ("queue", job.queue == self.queue),
            ("lane", job.lane == self.lane),
            ("priority", job.priority == self.priority),
            ("payload", validation.json_identity(job.payload) == self.payload_identity),
            ("max_recoveries", job.max_recoveries == self.max_recoveries),
            ("run_after", job.run_after == self.run_after),
            ("retry", job.retry_policy == (self.retry.to_json() if self.retry else None)),
            ("timeout", job.timeout == self.timeout),
        )
        return [name for name, same in pairs if not same]


def enqueue(using: str, new: NewJob) -> EnqueueResult:
    """Insert ``new`` and make it its queue's head if it outranks the rest.

    A job with ``run_after`` in the future is *delayed*: it is not in its queue's order
    (and blocks nothing) until it is due; ``store.due`` then gives it its place.

    A caller in autocommit, with no ``queue_changed`` receiver and no pruned ids to look
    up, gets a transaction of the database's own where the dialect has one
    (``Dialect.enter_job_alone``: on PostgreSQL, one exchange, no ``BEGIN`` or ``COMMIT``);
    any other caller goes through ``enqueue_many``.
    """
    now = timezone.now()
    delayed = new.run_after is not None and new.run_after > now
    if _on_its_own(using):
        inserted = dialect(using).enter_job_alone(new, delayed, now)
        if inserted:
            written = Written(using, [new], [delayed])
            written.add(*inserted[0])
            return EnqueueResult(status="queued", job=written.only())
        if inserted is not None:
            stored = Job.objects.using(using).filter(job_id=new.job_id).first()
            if stored is not None:
                return _repeat(new, stored)
    return enqueue_many(using, [new])[0]


def _repeat(new: NewJob, stored: Job) -> EnqueueResult:
    """``new`` found ``stored`` under its id: a duplicate, or ``JobConflict``."""
    differing = new.differences(stored)
    if differing:
        raise JobConflict(new.job_id, differing)
    return EnqueueResult(status="duplicate", job=stored)


def _on_its_own(using: str) -> bool:
    """Whether an enqueue may run as a transaction of the database's own: the caller has
    none open, no ``queue_changed`` receiver must run inside it (a raising one rolls it
    back), and no pruned id must be looked up first."""
    connection = connections[using]
    if connection.in_atomic_block or not connection.get_autocommit():
        return False
    return not heads.listening() and not pruned_ids.kept()


@deadlocks.retried
def enqueue_many(using: str, batch: Sequence[NewJob]) -> list[EnqueueResult]:
    """Insert every job of ``batch`` in one transaction, all or nothing.

    Each distinct queue is locked (or created) once, in name order, and each queue's head
    is settled once, with all its new jobs in: a few statements for the whole batch. A
    queue the call creates needs no look at other rows: its best new job is its head.

    No savepoint unless ``queue_changed`` receivers are connected (a raising receiver then
    rolls back only this call), so an enqueue inside a view's transaction costs no extra
    statements: a conflicting repeat (rare) undoes this call's rows by hand before
    ``JobConflict`` is raised, outside the block, leaving the caller's transaction usable.
    """
    if pruned_ids.kept():
        pruned = pruned_ids.duplicates(using, [new.job_id for new in batch])
        if pruned:
            return _beside_pruned(using, batch, pruned)
    now = timezone.now()
    delays = [new.run_after is not None and new.run_after > now for new in batch]
    with transaction.atomic(using=using, savepoint=heads.listening()):
        written, created = _insert(using, batch, delays, now)
        results: list[EnqueueResult] | JobConflict
        if written.every_id_new():
            results = written.results()
        else:
            results = _resolve_repeats(using, batch, written.in_order(), created)
        if not isinstance(results, JobConflict):
            _announce(using, batch, results)
    if isinstance(results, JobConflict):
        raise results  # outside the block: the caller's transaction stays usable
    return results


def _beside_pruned(
    using: str, batch: Sequence[NewJob], pruned: dict[str, EnqueueResult]
) -> list[EnqueueResult]:
    """Enqueue the jobs of ``batch`` whose ids were not pruned; the pruned ones are
    duplicates (whatever their other arguments: the pruned job's are gone)."""
    rest = [new for new in batch if new.job_id not in pruned]
    written = iter(enqueue_many(using, rest) if rest else [])
    return [pruned[new.job_id] if new.job_id in pruned else next(written) for new in batch]


def _announce(using: str, batch: Sequence[NewJob], results: Sequence[EnqueueResult]) -> None:
    """``queue_changed`` for each queue that gained a job, in name order."""
    if heads.listening():
        gained = {new.queue for new, r in zip(batch, results, strict=True) if r.status == "queued"}
        for queue in sorted(gained):
            heads.announce(queue, None, using=using)


def _insert(
    using: str, batch: Sequence[NewJob], delays: Sequence[bool], now: datetime
) -> tuple[Written, set[str]]:
    """The rows written for ``batch`` and the queues created."""
    inserted, created, ready = dialect(using).enter_jobs(batch, delays, now)
    written = Written(using, batch, delays)
    for pk, job_id, enqueued_at, flag in inserted:
        written.add(pk, job_id, enqueued_at, ready.get(pk, flag))
    return written, created


def _resolve_repeats(
    using: str, batch: Sequence[NewJob], jobs: Sequence[Job | None], created: set[str]
) -> list[EnqueueResult] | JobConflict:
    """Compare repeated ids (``None`` in ``jobs``) with their stored jobs; on a conflict,
    undo the whole call and return it.

    A repeat the statement meant to make its queue's head was not inserted, so the heads
    of the queues with repeats are recomputed.
    """

    repeats = [new for new, job in zip(batch, jobs, strict=True) if job is None]
    stored = Job.objects.using(using).in_bulk([new.job_id for new in repeats], field_name="job_id")
    fresh = [job for job in jobs if job is not None]
    results = []
    for new, job in zip(batch, jobs, strict=True):
        if job is not None:
            results.append(EnqueueResult(status="queued", job=job))
            continue
        differing = new.differences(stored[new.job_id])
        if differing:
            Job.objects.using(using).filter(pk__in=[job.pk for job in fresh]).delete()
            Queue.objects.using(using).filter(name__in=sorted(created)).delete()
            for queue in sorted({n.queue for n in batch} - created):
                heads.refresh(using, queue)
            return JobConflict(new.job_id, differing)
        results.append(EnqueueResult(status="duplicate", job=stored[new.job_id]))
    for queue in sorted({new.queue for new in repeats}):
        entered = [job.pk for job in fresh if job.queue == queue]
        head = heads.refresh(using, queue, entered=entered)
        for job in fresh:
            if job.queue == queue:
                job.ready = head.state == "queued" and head.job_id == job.job_id
    return results
