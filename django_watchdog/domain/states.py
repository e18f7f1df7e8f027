"""Job states and outcomes, and the reasons the store writes by itself."""

from __future__ import annotations

import hashlib
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

NO_RECOVERY_POLICY_REASON = "Execution disappeared without a recovery policy"


def budget_exhausted_reason(max_recoveries: int) -> str:
    return f"Restart recovery budget exhausted ({max_recoveries} recoveries)"


#: ``cancel:`` plus a job id fits the 256 characters of an identifier up to this length.
DEFAULT_INTENT_PLAIN_MAX = 256 - len("cancel:")


def default_cancellation_id(job_id: str) -> str:
    """The intent id a plain ``cancel(job_id)`` records, so repeating it is idempotent.

    ``cancel:<job_id>`` while that fits in 256 characters; for a longer job id,
    ``cancel#sha256:<hex digest of the id>`` (78 characters). The two forms never meet:
    a derived id starting ``cancel:`` always names the job after the colon.
    """
    if len(job_id) <= DEFAULT_INTENT_PLAIN_MAX:
        return f"cancel:{job_id}"
    digest = hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"cancel#sha256:{digest}"
