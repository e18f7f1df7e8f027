"""Enqueue: insert a job once per ``job_id``, idempotently (SPEC §4.1)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from ..conf import setting
from ..domain import validation
from ..domain.errors import InvalidInput, JobConflict
from ..domain.retries import RetryPolicy
from ..domain.values import EnqueueResult
from . import heads, rows, vendor

if TYPE_CHECKING:
    from ..models import Job


@dataclass(frozen=True, kw_only=True, slots=True)
class NewJob:
    """A validated enqueue request; ``payload_json`` is the canonical text idempotency compares."""

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
    ) -> NewJob:
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise InvalidInput(
                "retry", f"must be a RetryPolicy or None, not {type(retry).__name__}"
            )
        return cls(
            job_id=validation.identifier(job_id, "job_id"),
            queue=validation.identifier(queue, "queue"),
            lane=validation.lane(lane),
            priority=validation.priority(priority),
            payload=payload,
            payload_json=validation.canonical_json(
                payload, "payload", max_bytes=int(setting("MAX_PAYLOAD_BYTES"))
            ),
            max_recoveries=validation.max_recoveries(max_recoveries),
            run_after=validation.aware_datetime(run_after, "run_after"),
            retry=retry,
            timeout=validation.seconds(timeout, "timeout"),
        )

    def differences(self, job: Job) -> list[str]:
        """Fields in which ``job`` differs from this request, in contract order."""
        stored_payload = json.dumps(job.payload, sort_keys=True, separators=(",", ":"))
        pairs = (
            ("queue", job.queue == self.queue),
            ("lane", job.lane == self.lane),
            ("priority", job.priority == self.priority),
            ("payload", stored_payload == self.payload_json),
            ("max_recoveries", job.max_recoveries == self.max_recoveries),
            ("run_after", job.run_after == self.run_after),
            ("retry", job.retry_policy == (self.retry.to_json() if self.retry else None)),
            ("timeout", job.timeout == self.timeout),
        )
        return [name for name, same in pairs if not same]


#: PostgreSQL: insert the batch and settle each queue's head in the same statement. Every
#: queue is already locked, so the snapshot is current.
#: A queue's best new job becomes its head when nothing runs or waits to retry there and
#: no queued job ranks at least as high (older jobs win ties); the head it displaces
#: loses its ready flag. Workers of the lanes given a ready job (or a delayed one, whose
#: due time they must learn) are woken.
INSERT_WITH_HEADS_POSTGRES = """
WITH input AS (
    SELECT nextval(pg_get_serial_sequence('watchdog_job', 'id')) AS id, u.*
      FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[], %s::jsonb[],
                  %s::bigint[], %s::boolean[], %s::timestamptz[], %s::jsonb[],
                  %s::double precision[])
           WITH ORDINALITY
           AS u(job_id, queue, lane, priority, payload, max_recoveries, delayed, run_after,
                retry_policy, timeout, ordinal)
     ORDER BY u.ordinal
),
best AS (
    SELECT DISTINCT ON (queue) id, queue, priority FROM input
     WHERE NOT delayed
     ORDER BY queue, priority DESC, id
),
promoted AS (
    SELECT b.id, b.queue FROM best b
     WHERE NOT EXISTS (SELECT 1 FROM watchdog_job j
                        WHERE j.queue = b.queue AND j.state = 'running')
       AND NOT EXISTS (SELECT 1 FROM watchdog_job j
                        WHERE j.queue = b.queue AND j.state = 'queued'
                          AND j.retry_at IS NOT NULL)
       AND NOT EXISTS (SELECT 1 FROM watchdog_job j
                        WHERE j.queue = b.queue AND j.state = 'queued'
                          AND j.delayed = FALSE AND j.priority >= b.priority)
),
inserted AS (
    INSERT INTO watchdog_job
        (id, position, job_id, queue, lane, priority, payload, max_recoveries, state,
         recovery_count, attempts, ready, delayed, run_after, retry_policy, timeout,
         enqueued_at)
    SELECT i.id, CASE WHEN i.delayed THEN NULL ELSE i.id END, i.job_id, i.queue, i.lane,
           i.priority, i.payload, i.max_recoveries, 'queued', 0, 0, p.id IS NOT NULL,
           i.delayed, i.run_after, i.retry_policy, i.timeout, <NOW>
      FROM input i LEFT JOIN promoted p ON p.id = i.id
     ORDER BY i.id
    ON CONFLICT (job_id) DO NOTHING
    RETURNING <COLUMNS>
),
demoted AS (
    UPDATE watchdog_job j SET ready = FALSE FROM promoted p
     WHERE j.queue = p.queue AND j.ready AND j.cancellation_id IS NULL
    RETURNING 1
)
SELECT inserted.*, CASE WHEN inserted.ready OR inserted.delayed
                        THEN pg_notify(%s, inserted.lane) END
  FROM inserted
"""
UNDO_INSERT = "DELETE FROM watchdog_job WHERE id = ANY(%s::bigint[])"
UNDO_QUEUES = "DELETE FROM watchdog_queue WHERE name = ANY(%s::text[])"
#: SQLite (one writer at a time, so every read is current): ids drawn by hand, after the
#: last one AUTOINCREMENT gave, so a position is its job's id as on PostgreSQL.
CREATE_QUEUES_SQLITE = (
    "INSERT INTO watchdog_queue (name, created_at) VALUES {values} ON CONFLICT (name) DO NOTHING"
)
LAST_ID_SQLITE = "SELECT COALESCE(MAX(seq), 0) FROM sqlite_sequence WHERE name = 'watchdog_job'"
INSERT_ROWS_SQLITE = """
INSERT INTO watchdog_job
    (id, position, job_id, queue, lane, priority, payload, max_recoveries, delayed, run_after,
     retry_policy, timeout, state, recovery_count, attempts, ready, enqueued_at)
VALUES {values}
ON CONFLICT (job_id) DO NOTHING
RETURNING <COLUMNS>
"""
INSERT_ROW_SQLITE = "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, 'queued', 0, 0, 0, <NOW>)"
#: The ``ready`` flag of every current head and every new job of the given queues, from the
#: queue's head (heads.HEAD): the running job, else a job waiting to retry, else the best.
REFRESH_HEADS_SQLITE = """
UPDATE watchdog_job AS w SET ready = CASE WHEN w.id = (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM watchdog_job r
                              WHERE r.queue = w.queue AND r.state = 'running') THEN NULL
           ELSE COALESCE(
               (SELECT r.id FROM watchdog_job r
                 WHERE r.queue = w.queue AND r.state = 'queued' AND r.retry_at IS NOT NULL
                 LIMIT 1),
               (SELECT b.id FROM watchdog_job b
                 WHERE b.queue = w.queue AND b.state = 'queued' AND b.delayed = <FALSE>
                 ORDER BY b.priority DESC, b.position ASC
                 LIMIT 1))
           END) THEN 1 ELSE 0 END
 WHERE w.queue IN ({queues}) AND w.state = 'queued' AND w.cancellation_id IS NULL
   AND (w.ready = <TRUE> OR w.id > %s)
RETURNING id, ready
"""
SQLITE_ROWS_PER_STATEMENT = 500


def enqueue(using: str, new: NewJob) -> EnqueueResult:
    """Insert ``new`` and make it its queue's head if it outranks the rest.

    A job with ``run_after`` in the future is *delayed*: it is not in its queue's order
    (and blocks nothing) until it is due; ``store.due`` then gives it its place.
    """
    return enqueue_many(using, [new])[0]


def enqueue_many(using: str, batch: Sequence[NewJob]) -> list[EnqueueResult]:
    """Insert every job of ``batch`` in one transaction, all or nothing.

    Each distinct queue is locked (or created) once, in name order, and each queue's head
    is settled once, with all its new jobs in: a few statements for the whole batch.
    """
    if vendor.is_postgres(using):
        return _enqueue_many_postgres(using, batch)
    return _enqueue_many_sqlite(using, batch)


def _announce(using: str, jobs: Iterable[Job]) -> None:
    """``queue_changed`` for each queue that gained a job, in name order."""
    if heads.listening():
        for queue in sorted({job.queue for job in jobs}):
            heads.announce(queue, None, using=using)


def _enqueue_many_postgres(using: str, batch: Sequence[NewJob]) -> list[EnqueueResult]:
    """``enqueue_many`` in two statements (lock or create the queues; insert + heads), sent
    together in one round trip.

    No savepoint, so an enqueue inside a view's transaction costs no extra round trips: a
    conflicting repeat (rare) undoes this call's rows by hand before ``JobConflict`` is
    raised, outside the block, leaving the caller's transaction usable. With
    ``queue_changed`` receivers there is one, so a receiver that raises rolls back only
    this call.
    """
    from ..conf import setting

    now = timezone.now()
    delays = [new.run_after is not None and new.run_after > now for new in batch]
    per_job = [_columns(using, new, delayed) for new, delayed in zip(batch, delays, strict=True)]
    params = [*(list(column) for column in zip(*per_job, strict=True)), setting("NOTIFY_CHANNEL")]
    conflict: JobConflict | None = None
    results: list[EnqueueResult] = []
    with transaction.atomic(using=using, savepoint=heads.listening()):
        held, found_rows = vendor.fetch_each(
            using,
            [
                vendor.create_or_lock_queues(using, [new.queue for new in batch]),
                (INSERT_WITH_HEADS_POSTGRES, params),
            ],
        )
        created = {name for name, new in held if new}
        width = len(rows.job_fields())
        inserted: dict[str, Job] = {}
        for found in found_rows:
            job = rows.to_job(using, found[:width])
            inserted[job.job_id] = job
        jobs: list[Job | None] = [inserted.pop(new.job_id, None) for new in batch]
        if all(job is not None for job in jobs):
            results = [EnqueueResult(status="queued", job=job) for job in jobs if job]
        else:
            resolved = _resolve_repeats(using, batch, jobs, created)
            if isinstance(resolved, JobConflict):
                conflict = resolved
            else:
                results = resolved
        if conflict is None:
            _announce(using, (r.job for r in results if r.status == "queued" and r.job))
    if conflict is not None:
        raise conflict
    return results


def _enqueue_many_sqlite(using: str, batch: Sequence[NewJob]) -> list[EnqueueResult]:
    """``enqueue_many`` with a few multi-row statements per 500 jobs, not several per job."""
    from ..models import Job

    now = timezone.now()
    step = SQLITE_ROWS_PER_STATEMENT
    results: list[EnqueueResult] = []
    with transaction.atomic(using=using):
        # A conflicting repeat raises inside this block: even a new queue row rolls back.
        queues = sorted({new.queue for new in batch})
        stamp = vendor.param_datetime(using, now)
        for start in range(0, len(queues), step):
            names = queues[start : start + step]
            sql = CREATE_QUEUES_SQLITE.format(values=", ".join(["(%s, %s)"] * len(names)))
            vendor.execute(using, sql, [value for name in names for value in (name, stamp)])
        last_id = int(vendor.fetch(using, LAST_ID_SQLITE)[0][0])
        inserted: dict[str, Job] = {}
        for start in range(0, len(batch), step):
            params: list[Any] = []
            for offset, new in enumerate(batch[start : start + step], start=start + 1):
                delayed = new.run_after is not None and new.run_after > now
                pk = last_id + offset
                params.extend((pk, None if delayed else pk, *_columns(using, new, delayed)))
            count = min(step, len(batch) - start)
            sql = INSERT_ROWS_SQLITE.format(values=", ".join([INSERT_ROW_SQLITE] * count))
            for found in vendor.fetch(using, sql, params):
                job = rows.to_job(using, found)
                inserted[job.job_id] = job
        entered = sorted({job.queue for job in inserted.values() if not job.delayed})
        ready: set[int] = set()
        for start in range(0, len(entered), step):
            names = entered[start : start + step]
            sql = REFRESH_HEADS_SQLITE.format(queues=", ".join(["%s"] * len(names)))
            for pk, flag in vendor.fetch(using, sql, [*names, last_id]):
                if flag:
                    ready.add(pk)
        for new in batch:
            if new.job_id not in inserted:
                results.append(_duplicate(new, Job.objects.using(using).get(job_id=new.job_id)))
                continue
            job = inserted.pop(new.job_id)
            job.ready = job.pk in ready
            results.append(EnqueueResult(status="queued", job=job))
        _announce(using, (r.job for r in results if r.status == "queued" and r.job))
    return results


def _resolve_repeats(
    using: str, batch: Sequence[NewJob], jobs: Sequence[Job | None], created: set[str]
) -> list[EnqueueResult] | JobConflict:
    """Compare repeated ids (``None`` in ``jobs``) with their stored jobs; on a conflict,
    undo the whole call and return it.

    A repeat the statement meant to make its queue's head was not inserted, so the heads
    of the queues with repeats are recomputed.
    """
    from ..models import Job

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
            vendor.execute(using, UNDO_INSERT, ([job.pk for job in fresh],))
            vendor.execute(using, UNDO_QUEUES, (sorted(created),))
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


def _columns(using: str, new: NewJob, delayed: bool) -> tuple[Any, ...]:
    return (
        new.job_id,
        new.queue,
        new.lane,
        new.priority,
        vendor.param_json(using, new.payload),
        new.max_recoveries,
        delayed,
        vendor.param_datetime(using, new.run_after),
        vendor.param_json(using, new.retry.to_json() if new.retry else None),
        new.timeout,
    )


def _duplicate(new: NewJob, prior: Job) -> EnqueueResult:
    differing = new.differences(prior)
    if differing:
        raise JobConflict(new.job_id, differing)
    return EnqueueResult(status="duplicate", job=prior)
