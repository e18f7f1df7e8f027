"""Job states and outcomes, and the reasons the store writes by itself."""

from __future__ import annotations

from enum import StrEnum


class State(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SETTLED = "settled"


class Outcome(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    OUTCOME_UNKNOWN = "outcome_unknown"
    INTERRUPTED = "interrupted"


PENDING_STATES = (State.QUEUED, State.RUNNING)
OUTCOMES_WITH_REASON = (Outcome.FAILED, Outcome.INTERRUPTED)

NO_RECOVERY_POLICY_REASON = "Execution disappeared without a recovery policy"


def budget_exhausted_reason(max_recoveries: int) -> str:
    return f"Restart recovery budget exhausted ({max_recoveries} recoveries)"


def default_cancellation_id(job_id: str) -> str:
    """The intent id a plain ``cancel(job_id)`` records, so repeating it is idempotent."""
    return f"cancel:{job_id}"
