"""What one inline run of a job did: the record ``run_jobs()`` returns for each."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, cast

if TYPE_CHECKING:
    from ..models import Job

RunOutcome = Literal["completed", "failed", "outcome_unknown", "cancelled", "retrying"]


@dataclass(frozen=True, kw_only=True, slots=True)
class JobRun:
    """One run of a job's handler, and how it ended.

    ``outcome`` is the job's outcome as stored, or ``retrying`` when the failure went back
    to its queue to run again (``retry_at``). ``result`` is the stored result of a completed
    run; ``exception`` what the handler raised (``None`` if it returned). ``attempts``
    counts this run. ``ran`` is ``False`` for a queued job that a recorded cancellation
    settled ``cancelled`` without running its handler. ``job`` is the row after the run.
    """

    job_id: str
    queue: str
    lane: str
    outcome: RunOutcome
    result: Any = None
    exception: BaseException | None = None
    failure_reason: str | None = None
    attempts: int
    retry_at: datetime | None = None
    ran: bool = True
    job: Job

    @classmethod
    def of(cls, job: Job, *, exception: BaseException | None = None, ran: bool = True) -> JobRun:
        """The record of a run whose job now reads as ``job``."""
        outcome = cast(RunOutcome, job.outcome or "retrying")
        return cls(
            job_id=job.job_id,
            queue=job.queue,
            lane=job.lane,
            outcome=outcome,
            result=job.result,
            exception=exception,
            failure_reason=job.failure_reason,
            attempts=job.attempts,
            retry_at=job.retry_at,
            ran=ran,
            job=job,
        )
