"""Enqueue: insert a job once per ``job_id``, idempotently (SPEC §4.1)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import connections, transaction
from django.utils import timezone

from ..conf import setting
from ..domain import validation
from ..domain.errors import JobConflict
from ..domain.states import State
from ..domain.values import EnqueueResult
from . import heads, vendor

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
    ) -> NewJob:
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
        )
        return [name for name, same in pairs if not same]


INSERT_JOB = """
INSERT INTO watchdog_job
    (job_id, queue, lane, priority, payload, max_recoveries, state, recovery_count,
     ready, enqueued_at)
VALUES (%s, %s, %s, %s, %s, %s, 'queued', 0, %s, %s)
ON CONFLICT (job_id) DO NOTHING
RETURNING id
"""


def enqueue(using: str, new: NewJob) -> EnqueueResult:
    """Insert ``new`` and make it its queue's head if it outranks the rest."""
    from ..models import Job

    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        prior = jobs.filter(job_id=new.job_id).first()
        if prior is not None:
            return _duplicate(new, prior)
        vendor.lock_queue(using, new.queue, create=True)
        connection = connections[using]
        enqueued_at = timezone.now()
        payload_field = Job._meta.get_field("payload")
        inserted = vendor.fetch(
            using,
            INSERT_JOB,
            (
                new.job_id,
                new.queue,
                new.lane,
                new.priority,
                payload_field.get_db_prep_save(new.payload, connection),
                new.max_recoveries,
                False,
                connection.ops.adapt_datetimefield_value(enqueued_at),
            ),
        )
        if not inserted:
            # A concurrent transaction inserted the same id and committed first.
            return _duplicate(new, jobs.get(job_id=new.job_id))
        head, wake = heads.refresh(using, new.queue, demote=True)
        if wake is not None:
            vendor.notify(using, wake)
        job = Job(
            id=inserted[0][0],
            job_id=new.job_id,
            queue=new.queue,
            lane=new.lane,
            priority=new.priority,
            payload=new.payload,
            max_recoveries=new.max_recoveries,
            state=State.QUEUED,
            recovery_count=0,
            ready=head.job_id == new.job_id,
            enqueued_at=enqueued_at,
        )
        job._state.adding = False
        job._state.db = using
        heads.announce(new.queue, head)
    return EnqueueResult(status="queued", job=job)


def _duplicate(new: NewJob, prior: Job) -> EnqueueResult:
    differing = new.differences(prior)
    if differing:
        raise JobConflict(new.job_id, differing)
    return EnqueueResult(status="duplicate", job=prior)
