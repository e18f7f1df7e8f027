"""Enqueue: insert a job once per ``job_id``, idempotently (SPEC §4.1)."""

from __future__ import annotations

import json
from collections.abc import Sequence
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


INSERT_POSTGRES = """
WITH next AS (SELECT nextval(pg_get_serial_sequence('watchdog_job', 'id')) AS id)
INSERT INTO watchdog_job
    (id, position, job_id, queue, lane, priority, payload, max_recoveries, state,
     recovery_count, attempts, ready, delayed, run_after, retry_policy, timeout, enqueued_at)
SELECT next.id, CASE WHEN %s THEN NULL ELSE next.id END, %s, %s, %s, %s, %s, %s, 'queued',
       0, 0, FALSE, %s, %s, %s, %s, <NOW>
  FROM next
ON CONFLICT (job_id) DO NOTHING
RETURNING <COLUMNS>
"""
#: PostgreSQL bulk path: the whole batch in one statement, ids drawn in batch order.
INSERT_MANY_POSTGRES = """
INSERT INTO watchdog_job
    (id, position, job_id, queue, lane, priority, payload, max_recoveries, state,
     recovery_count, attempts, ready, delayed, run_after, retry_policy, timeout, enqueued_at)
SELECT v.id, CASE WHEN v.delayed THEN NULL ELSE v.id END, v.job_id, v.queue, v.lane, v.priority,
       v.payload, v.max_recoveries, 'queued', 0, 0, FALSE, v.delayed, v.run_after,
       v.retry_policy, v.timeout, <NOW>
  FROM (SELECT nextval(pg_get_serial_sequence('watchdog_job', 'id')) AS id, u.*
          FROM unnest(%s::text[], %s::text[], %s::text[], %s::bigint[], %s::jsonb[],
                      %s::bigint[], %s::boolean[], %s::timestamptz[], %s::jsonb[],
                      %s::double precision[])
               WITH ORDINALITY
               AS u(job_id, queue, lane, priority, payload, max_recoveries, delayed, run_after,
                    retry_policy, timeout, ordinal)
         ORDER BY u.ordinal) AS v
ON CONFLICT (job_id) DO NOTHING
RETURNING <COLUMNS>
"""
INSERT_SQLITE = """
INSERT INTO watchdog_job
    (position, job_id, queue, lane, priority, payload, max_recoveries, state,
     recovery_count, attempts, ready, delayed, run_after, retry_policy, timeout, enqueued_at)
VALUES (CASE WHEN %s THEN NULL
             -- AUTOINCREMENT gives the new row seq + 1: its position is its id.
             ELSE (SELECT COALESCE(MAX(seq), 0) + 1 FROM sqlite_sequence
                    WHERE name = 'watchdog_job') END,
        %s, %s, %s, %s, %s, %s, 'queued', 0, 0, FALSE, %s, %s, %s, %s, <NOW>)
ON CONFLICT (job_id) DO NOTHING
RETURNING <COLUMNS>
"""


def enqueue(using: str, new: NewJob) -> EnqueueResult:
    """Insert ``new`` and make it its queue's head if it outranks the rest.

    A job with ``run_after`` in the future is *delayed*: it is not in its queue's order
    (and blocks nothing) until it is due; ``store.due`` then gives it its place.
    """
    return enqueue_many(using, [new])[0]


def enqueue_many(using: str, batch: Sequence[NewJob]) -> list[EnqueueResult]:
    """Insert every job of ``batch`` in one transaction, all or nothing.

    Each distinct queue is locked once (in name order) and its head refreshed once, after
    all its jobs are in: a bulk enqueue costs one statement per job, not a transaction.
    """
    from ..models import Job

    now = timezone.now()
    results: list[EnqueueResult] = []
    entered: dict[str, list[Job]] = {}
    with transaction.atomic(using=using):
        # Insert first and compare only on conflict: a fresh job costs no extra read. A
        # conflicting repeat raises inside this block, so even a new queue row rolls back.
        queues = sorted({new.queue for new in batch})
        vendor.lock_queues(using, queues, create=True)
        for new, job in zip(batch, _insert(using, batch, now), strict=True):
            if job is None:
                results.append(_duplicate(new, Job.objects.using(using).get(job_id=new.job_id)))
                continue
            results.append(EnqueueResult(status="queued", job=job))
            entered.setdefault(new.queue, []).append(job)
        for queue in queues:
            jobs = entered.get(queue, [])
            positioned = [job.pk for job in jobs if not job.delayed]
            if positioned:
                head = heads.refresh(using, queue, entered=positioned)
                for job in jobs:
                    job.ready = head.state == "queued" and head.job_id == job.job_id
                heads.announce(queue, head, using=using)
            elif jobs:
                heads.announce(queue, None, using=using)
            for lane in sorted({job.lane for job in jobs if job.delayed}):
                vendor.notify(using, lane)  # idle workers learn when to look again
    return results


def _insert(using: str, batch: Sequence[NewJob], now: datetime) -> list[Job | None]:
    """Insert the batch; per job the inserted row, or ``None`` where its id already existed.

    A job id repeated inside the batch is inserted once; later repeats come back ``None``.
    """
    delays = [new.run_after is not None and new.run_after > now for new in batch]
    if vendor.is_postgres(using) and len(batch) > 1:
        per_job = [
            _columns(using, new, delayed) for new, delayed in zip(batch, delays, strict=True)
        ]
        columns = [list(column) for column in zip(*per_job, strict=True)]
        inserted = {
            job.job_id: job
            for job in (
                rows.to_job(using, row)
                for row in vendor.fetch(using, INSERT_MANY_POSTGRES, columns)
            )
        }
        found: list[Job | None] = []
        for new in batch:
            found.append(inserted.pop(new.job_id, None))
        return found
    insert = INSERT_POSTGRES if vendor.is_postgres(using) else INSERT_SQLITE
    result: list[Job | None] = []
    for new, delayed in zip(batch, delays, strict=True):
        row = vendor.fetch(using, insert, (delayed, *_columns(using, new, delayed)))
        result.append(rows.to_job(using, row[0]) if row else None)
    return result


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
