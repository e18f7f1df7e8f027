"""Frozen values the public API returns, and the handler's decision."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from .states import Outcome

if TYPE_CHECKING:
    from django_watchdog.models import Job

HeadState = Literal["idle", "queued", "running"]


@dataclass(frozen=True, kw_only=True, slots=True)
class QueueHead:
    """What a queue shows now: its running job, else the queued job that runs next."""

    state: HeadState
    job_id: str | None = None
    cancellation_requested: bool = False


IDLE = QueueHead(state="idle")


@dataclass(frozen=True, kw_only=True, slots=True)
class EnqueueResult:
    status: Literal["queued", "duplicate"]
    job: Job


@dataclass(frozen=True, kw_only=True, slots=True)
class CancelResult:
    status: Literal["recorded", "replayed", "conflict", "missing"]
    cancellation_id: str


@dataclass(frozen=True, kw_only=True, slots=True)
class SettledRecord:
    """One entry of the settled feed; pass ``cursor`` as ``after`` to read on."""

    cursor: str
    job: Job


@dataclass(frozen=True, kw_only=True, slots=True)
class LaneFailure:
    """Jobs a ``fail_lane`` batch settled; ``more`` when the lane still has pending jobs."""

    jobs: tuple[Job, ...]
    more: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimResult:
    """``claimed`` hands out a job; ``cancelled`` settled a queued job that had an intent."""

    status: Literal["claimed", "cancelled", "none"]
    job: Job | None = None
    claim_token: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class SettleResult:
    """``retrying``: the failure went back to its queue's head to run again at ``retry_at``."""

    status: Literal["settled", "retrying", "replayed", "conflict", "missing"]
    job: Job | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ReconcileResult:
    """``deferred``: another transaction held the job's queue past the worker's lock wait;
    nothing changed, and a later recovery pass tries ``job_id`` again."""

    status: Literal["requeued", "settled", "conflict", "missing", "deferred"]
    job: Job | None = None
    job_id: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Decision:
    """What a handler's run decided; the store may still override it with ``cancelled``."""

    outcome: Outcome
    failure_reason: str | None = None
    result: Any = None
    traceback: str | None = None
    #: When set on a failure, the job waits at its queue's head and runs again then.
    retry_at: datetime | None = None

    @classmethod
    def completed(cls, result: Any = None) -> Decision:
        return cls(outcome=Outcome.COMPLETED, result=result)

    @classmethod
    def failed(cls, reason: str, traceback: str | None = None) -> Decision:
        return cls(outcome=Outcome.FAILED, failure_reason=reason, traceback=traceback)

    @classmethod
    def outcome_unknown(cls, traceback: str | None = None) -> Decision:
        return cls(outcome=Outcome.OUTCOME_UNKNOWN, traceback=traceback)
