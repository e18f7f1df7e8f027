"""Enqueue: insert a job once per ``job_id``, idempotently (SPEC §4.1)."""

from __future__ import annotations

import json
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
    from ..models import Job

    now = timezone.now()
    delayed = new.run_after is not None and new.run_after > now
    with transaction.atomic(using=using):
        # Insert first and compare only on conflict: a fresh job costs no extra read. A
        # conflicting repeat raises inside this block, so even the queue row rolls back.
        vendor.lock_queue(using, new.queue, create=True)
        fields = (
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
        insert = INSERT_POSTGRES if vendor.is_postgres(using) else INSERT_SQLITE
        inserted = vendor.fetch(using, insert, (delayed, *fields))
        if not inserted:
            return _duplicate(new, Job.objects.using(using).get(job_id=new.job_id))
        job = rows.to_job(using, inserted[0])
        if delayed:
            vendor.notify(using, new.lane)  # idle workers learn when to look again
            heads.announce(new.queue, None, using=using)
        else:
            head = heads.refresh(using, new.queue, entered=(job.pk,))
            job.ready = head.job_id == job.job_id and head.state == "queued"
            heads.announce(new.queue, head, using=using)
    return EnqueueResult(status="queued", job=job)


def _duplicate(new: NewJob, prior: Job) -> EnqueueResult:
    differing = new.differences(prior)
    if differing:
        raise JobConflict(new.job_id, differing)
    return EnqueueResult(status="duplicate", job=prior)
