"""Reads that must go on past a row that does not decode, loading it as stored.

``Job.from_db`` and ``rows.to_job`` refuse a row edited by hand into something the store
cannot act on (``models.check_decodes``): the verb that meets it quarantines that job. A
few reads must not stop there: the settled feed (every settled job exactly once, a
quarantined one included), ``fail_lane``'s and recovery's results, the admin. Inside
``reading_as_stored()`` such a row loads as it is stored: an out-of-range timestamp as an
``UnreadableTimestamp``, JSON text that does not parse as that text, a bad lane as it is.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

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
