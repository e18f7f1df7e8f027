"""Reads that must go on past a row that does not decode, loading it as stored.

``Job.from_db`` and ``rows.to_job`` refuse a row edited by hand into something the store
cannot act on (``check_decodes``): the verb that meets it quarantines that job. A
few reads must not stop there: the settled feed (every settled job exactly once, a
quarantined one included), ``fail_lane``'s and recovery's results, the admin. Inside
``reading_as_stored()`` such a row loads as it is stored: an out-of-range timestamp as an
``UnreadableTimestamp``, JSON text that does not parse as that text, a bad lane as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from . import validation
from .errors import WatchdogError
from .timestamps import UnreadableTimestamp

_AS_STORED: ContextVar[bool] = ContextVar("django_watchdog_as_stored", default=False)


@contextmanager
def reading_as_stored() -> Iterator[None]:
    """Within: rows that do not decode load as stored instead of raising."""
    token = _AS_STORED.set(True)
    try:
        yield
    finally:
        _AS_STORED.reset(token)


def as_stored() -> bool:
    """Whether the current read loads undecodable rows as stored."""
    return _AS_STORED.get()


def check_decodes[Loaded](job: Loaded) -> Loaded:
    """``job`` (a loaded ``Job``), unless its row breaks the grammar no constraint can hold
    (edited by hand) and this read does not load rows as stored: then
    ``WatchdogError(kind="store_unavailable")`` naming that job."""
    if as_stored():
        return job  # whatever its problem, it loads as stored: no need to look for one
    loaded = vars(job)
    problem = _row_problem(loaded)
    if problem is not None:
        raise WatchdogError(
            f"job row does not decode: {problem}",
            kind="store_unavailable",
            job_id=str(loaded.get("job_id")),
        )
    return job


#: Timestamp columns that are never NULL. A driver that reads a stored instant Python cannot
#: hold as NULL (mysqlclient does, for MariaDB's year 0) leaves one ``None``: it is out of
#: range, as an ``UnreadableTimestamp`` is.
REQUIRED_TIMESTAMPS = ("enqueued_at",)


def _optional_identifier(field: str) -> Any:
    return lambda value: None if value is None else validation.identifier(value, field)


#: (field, its check) for the fields whose grammar no database constraint holds.
CHECKS: tuple[tuple[str, Any], ...] = (
    ("job_id", lambda v: validation.identifier(v, "job_id")),
    ("queue", lambda v: validation.identifier(v, "queue")),
    ("lane", validation.lane),
    ("priority", validation.priority),
    ("max_recoveries", validation.max_recoveries),
    ("cancellation_id", _optional_identifier("cancellation_id")),
    ("rerun_of", _optional_identifier("rerun_of")),
)


def _row_problem(loaded: dict[str, Any]) -> str | None:
    for name, check in CHECKS:
        if name in loaded:
            try:
                check(loaded[name])
            except WatchdogError as error:
                return str(error)
    for name, value in loaded.items():
        if isinstance(value, UnreadableTimestamp):
            return f"{name} is out of range ({value.stored}: not in years 1-9999)"
    for name in REQUIRED_TIMESTAMPS:
        if name in loaded and loaded[name] is None:
            return f"{name} is out of range (read as NULL: not in years 1-9999)"
    return None
