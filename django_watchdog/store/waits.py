"""Bounded lock waits: a worker never waits on another transaction's lock for long.

A worker stopped (SIGSTOP) or cut off inside a transaction keeps its locks until the server
ends that transaction. So every verb a worker runs waits for a lock at most
``WATCHDOG['LOCK_TIMEOUT']`` seconds (PostgreSQL's ``lock_timeout``, set for that
transaction only, never for the session: handlers' own queries on the same connection are
not bounded; on MariaDB, ``max_statement_time`` on each of the dialect's lock-taking
statements); past it the verb raises ``LockBusy`` and the worker skips that step until a
later pass. Claims need no bound: they skip locked queues (``SKIP LOCKED``).

SQLite needs nothing more: one write lock serves the whole database and its busy timeout
(``OPTIONS['timeout']``) already bounds every wait for it; running out of it is an outage of
the whole database (``database is locked``), retried with backoff like a lost connection.

Callers outside a worker (the API, the admin, commands) are not bounded: they wait as before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import DatabaseError, OperationalError

from ..conf import setting

#: PostgreSQL's SQLSTATE for a lock wait that ran out (``lock_timeout``) or ``NOWAIT``.
LOCK_NOT_AVAILABLE = "55P03"
#: MariaDB's error numbers for the same: ``innodb_lock_wait_timeout`` ran out (1205), or
#: the statement's ``max_statement_time`` did while it waited (1969: the dialect bounds its
#: lock-taking statements so, the lock wait timeout taking whole seconds only).
MARIADB_LOCK_WAIT_ENDED = (1205, 1969)

#: Seconds this thread's store verbs may wait for a lock; ``None``: unbounded.
_limit: ContextVar[float | None] = ContextVar("watchdog_lock_wait", default=None)


class LockBusy(OperationalError):
    """Another transaction held a lock past ``LOCK_TIMEOUT``: skip this step, retry later."""


def is_lock_busy(error: BaseException) -> bool:
    """Whether ``error`` is a lock wait that ran out (the driver's error, or Django's)."""
    if isinstance(error, LockBusy):
        return True
    cause = error.__cause__ if isinstance(error, DatabaseError) else error
    if getattr(cause, "sqlstate", None) == LOCK_NOT_AVAILABLE:
        return True
    number = getattr(cause, "args", None) or (None,)
    return type(cause).__module__.startswith("MySQLdb") and number[0] in MARIADB_LOCK_WAIT_ENDED


def limit() -> float | None:
    """Seconds a lock wait may last in this thread now, or ``None`` if unbounded."""
    return _limit.get()


def milliseconds(seconds: float) -> str:
    """``seconds`` as a ``lock_timeout`` value (at least 1 ms: 0 would mean "no limit")."""
    return f"{max(1, round(seconds * 1000))}ms"


@contextmanager
def bounded(seconds: float | None = None) -> Iterator[None]:
    """In this block this thread's store verbs wait at most ``seconds`` (default
    ``WATCHDOG['LOCK_TIMEOUT']``) for a lock; a wait that ran out leaves as ``LockBusy``
    (its transaction rolled back)."""
    token = _limit.set(float(setting("LOCK_TIMEOUT") if seconds is None else seconds))
    try:
        yield
    except OperationalError as error:
        if isinstance(error, LockBusy) or not is_lock_busy(error):
            raise
        raise LockBusy(str(error)) from error
    finally:
        _limit.reset(token)
