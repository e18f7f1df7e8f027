"""Re-runs: which settled jobs may run again, and the id each re-run gets.

A re-run is a new job (its own ``job_id``, so the original stays settled and the settled
feed yields each exactly once). Its id is derived from the original's and a re-run number,
so asking twice for "re-run number 2 of X" names one job, and the second ask is a
``duplicate`` of the first.
"""

from __future__ import annotations

import hashlib

from .errors import InvalidInput
from .states import Outcome, State
from .validation import IDENTIFIER_MAX

#: Outcomes a re-run may follow. ``completed`` and ``outcome_unknown`` are refused: the
#: job's effect happened (or may have); running it again is a new decision, made by
#: enqueueing a new job on purpose.
RERUNNABLE = (Outcome.FAILED, Outcome.INTERRUPTED, Outcome.CANCELLED)
#: A requester as recorded on a job (``admin:<username>``, ``cli:<os user>``).
REQUESTER_MAX = 150


def rerun_job_id(job_id: str, number: int) -> str:
    """The id of re-run ``number`` (1, 2, ...) of ``job_id``: ``<job_id>~rerun-<number>``
    while that fits in 256 characters, else ``rerun#sha256:<digest of job_id>~<number>``."""
    plain = f"{job_id}~rerun-{number}"
    if len(plain) <= IDENTIFIER_MAX:
        return plain
    digest = hashlib.sha256(job_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"rerun#sha256:{digest}~{number}"


def check_rerunnable(job_id: str, state: str, outcome: str | None) -> None:
    """Raise ``InvalidInput`` naming ``job_id`` unless it settled failed, interrupted or
    cancelled."""
    if state == State.SETTLED and outcome in RERUNNABLE:
        return
    now = f"settled {outcome}" if state == State.SETTLED else str(state)
    raise InvalidInput(
        "job_id",
        f"job {job_id!r} is {now}; only a settled failed, interrupted or cancelled job "
        "can be re-run",
    )


def number(value: object, field: str = "number") -> int:
    """A re-run number: an int from 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(field, f"must be an int from 1, not {value!r}")
    return value


def requester(value: object, field: str = "requested_by") -> str | None:
    """Who asked: ``None`` or a str of 1–150 characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a str or None, not {type(value).__name__}")
    if not 1 <= len(value) <= REQUESTER_MAX or "\x00" in value:
        raise InvalidInput(field, f"must be 1–{REQUESTER_MAX} characters without NUL")
    return value
