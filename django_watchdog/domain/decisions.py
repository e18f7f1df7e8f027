"""Map what a handler did (returned or raised) onto a settlement decision (SPEC §4.6)."""

from __future__ import annotations

import json
import traceback as tb
from typing import Any

from .errors import OutcomeUnknown
from .states import Outcome
from .validation import REASON_MAX
from .values import Decision


def failure_reason(error: BaseException) -> str:
    """``"ExceptionType: message"`` cut to 200 characters (never empty)."""
    message = str(error)
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text[:REASON_MAX]


def from_return(value: Any) -> tuple[Decision, str | None]:
    """A returned value completes the job; a value JSON cannot hold is dropped, with a warning."""
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        return Decision.completed(None), f"result dropped, not JSON-serialisable: {error}"
    return Decision.completed(value), None


def from_exception(error: BaseException) -> Decision:
    text = "".join(tb.format_exception(error))
    if isinstance(error, OutcomeUnknown):
        return Decision(outcome=Outcome.OUTCOME_UNKNOWN, traceback=text)
    return Decision.failed(failure_reason(error), traceback=text)
