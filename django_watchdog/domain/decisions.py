"""Map what a handler did (returned or raised) onto a settlement decision (SPEC §4.6).

Every decision made here can be stored by every supported database (SPEC §9 rule 17): a
result is kept only if it is JSON with no NUL character and no lone surrogate (PostgreSQL
refuses both in ``jsonb``; they are refused on SQLite too, so both databases give one
verdict), else it is dropped and the job's ``traceback`` says why; exception text keeps
every character, with NUL and lone surrogates written as backslash escapes.
"""

from __future__ import annotations

import json
import re
import traceback as tb
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from .errors import OutcomeUnknown
from .retries import RetryPolicy
from .states import Outcome
from .validation import REASON_MAX
from .values import Decision

#: A ``\u0000`` escape in JSON text: one preceded by an even number of backslashes (an odd
#: number would make it the text ``\u0000``, which is storable).
JSON_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")


def storable_text(text: str) -> str:
    """``text`` with NUL and lone surrogates as backslash escapes (``\\x00``, ``\\udXXX``):
    every character is still readable, and every database can hold the result."""
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


def failure_reason(error: BaseException) -> str:
    """``"ExceptionType: message"`` cut to 200 characters (never empty), storable."""
    try:
        message = str(error)
    except Exception as failure:  # noqa: BLE001 - a handler's exception may not print
        message = f"<str() raised {type(failure).__name__}>"
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return storable_text(text)[:REASON_MAX]


def unstorable_result(value: Any) -> str | None:
    """Why no database can store ``value`` as a JSON result; ``None`` if every one can."""
    if value is None or value is True or value is False:  # most handlers return nothing
        return None
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    except RecursionError:
        return "nested too deeply to encode as JSON"
    except (TypeError, ValueError, OverflowError) as error:
        return f"not JSON-serialisable: {error}"
    if JSON_NUL.search(text):
        return "it contains a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "it contains a lone surrogate"
    return None


def from_return(value: Any) -> tuple[Decision, str | None]:
    """A returned value completes the job; a value no database can hold is dropped, and the
    decision's ``traceback`` (and the returned warning) says why."""
    why = unstorable_result(value)
    if why is None:
        return Decision.completed(value), None
    warning = f"result dropped, {why}"
    return Decision(outcome=Outcome.COMPLETED, traceback=warning), warning


def from_exception(error: BaseException) -> Decision:
    text = storable_text(formatted(error))
    if isinstance(error, OutcomeUnknown):
        return Decision(outcome=Outcome.OUTCOME_UNKNOWN, traceback=text)
    return Decision.failed(failure_reason(error), traceback=text)


def after_failure(
    error: BaseException,
    *,
    policy: RetryPolicy | None,
    attempts: int,
    cancel_requested: bool,
    now: datetime,
) -> Decision:
    """The decision for a run that raised ``error`` after ``attempts`` runs in all.

    A ``failed`` run that ``policy`` retries (and whose job has no cancellation) gets a
    ``retry_at`` after the policy's backoff from ``now``; anything else is final.
    """
    decision = from_exception(error)
    if (
        decision.outcome != Outcome.FAILED
        or policy is None
        or cancel_requested
        or not policy.retries(error, attempts)
    ):
        return decision
    return replace(decision, retry_at=now + timedelta(seconds=policy.delay(attempts)))


def formatted(error: BaseException) -> str:
    """The traceback as Python prints it; a summary if formatting it fails."""
    try:
        return "".join(tb.format_exception(error))
    except Exception as failure:  # noqa: BLE001 - a broken __str__ must not lose the outcome
        frames = "".join(tb.format_tb(error.__traceback__))
        return (
            f"Traceback (most recent call last):\n{frames}{type(error).__name__} "
            f"(formatting it raised {type(failure).__name__})\n"
        )


def unstorable(decision: Decision, error: BaseException) -> Decision:
    """The ``failed`` decision that replaces ``decision`` when the database refused it."""
    problem = failure_reason(error)
    return Decision.failed(
        f"Outcome could not be stored: {problem}"[:REASON_MAX],
        traceback=storable_text(
            f"The handler's outcome ({decision.outcome.value}) could not be stored: {problem}"
        ),
    )
