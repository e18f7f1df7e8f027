"""Re-run: enqueue a settled job's work again as a new job linked to the original.

The new job goes through ``store.enqueue`` (its idempotency, queue lock, head and
``queue_changed``), then, in the same transaction, is marked ``rerun_of`` the original.
The original row is never written: it stays settled, and the feed yields it once.
"""

from __future__ import annotations

from django.db import transaction

from ..domain.errors import InvalidInput, JobConflict
from ..domain.reruns import check_rerunnable, rerun_job_id
from ..domain.retries import RetryPolicy
from ..domain.values import EnqueueResult
from ..models import Job
from . import deadlocks
from .enqueue import NewJob, enqueue


@deadlocks.retried
def rerun(
    using: str, job_id: str, *, rerun_id: str | None, requested_by: str | None
) -> EnqueueResult:
    """Enqueue a copy of settled job ``job_id`` (same queue, lane, priority, payload,
    recovery, retry and timeout; no delay) as ``rerun_id``, or as the next re-run number's
    derived id. A repeat with the same id is a ``duplicate`` returning that job.

    Raises ``InvalidInput`` if ``job_id`` is missing or not settled failed, interrupted or
    cancelled, and ``JobConflict`` if ``rerun_id`` names a job that is not its re-run.
    """

    jobs = Job.objects.using(using)
    with transaction.atomic(using=using):
        original = jobs.filter(job_id=job_id).first()
        if original is None:
            raise InvalidInput("job_id", f"no job {job_id!r}")
        check_rerunnable(job_id, original.state, original.outcome)
        new_id = rerun_id or next_rerun_id(using, job_id)
        retry = (
            RetryPolicy.from_json(original.retry_policy)
            if original.retry_policy is not None
            else None
        )
        new = NewJob.parse(
            new_id,
            queue=original.queue,
            lane=original.lane,
            priority=original.priority,
            payload=original.payload,
            max_recoveries=original.max_recoveries,
            retry=retry,
            timeout=original.timeout,
        )
        result = enqueue(using, new)
        job = result.job
        if result.status == "queued":
            jobs.filter(pk=job.pk).update(rerun_of=job_id, rerun_requested_by=requested_by)
            job.rerun_of, job.rerun_requested_by = job_id, requested_by
        elif job.pk is not None and job.rerun_of != job_id:
            raise JobConflict(new_id, ["rerun_of"])
    return result


def next_rerun_id(using: str, job_id: str) -> str:
    """The derived id of ``job_id``'s next re-run: one more than its re-runs so far.

    Two requests that race both count the same re-runs, so both name one job and the
    later is a ``duplicate``: a double click re-runs once.
    """

    done = Job.objects.using(using).filter(rerun_of=job_id).count()
    return rerun_job_id(job_id, done + 1)
