"""Deadlock victims: a transaction the store began itself, which the server rolled back
whole to end a deadlock, runs again from its start.

InnoDB (MariaDB) ends a deadlock by rolling back one transaction entirely, error 1213,
whatever savepoints it had. When the store began that transaction (no transaction of the
caller's around the verb), nothing of anyone else's went with it and nothing of it was
committed: the verb runs again, up to ``ATTEMPTS`` times in all, after a short jittered
pause, logging ``event=deadlock_retried`` once per rerun. A ``queue_changed`` receiver runs
again with it (its writes of the lost run were rolled back with it).

Inside a caller's transaction (``atomic`` block, or autocommit off) the caller's earlier
writes were rolled back too, so running the store's part again would commit it without
them: the verb raises ``DeadlockRolledBack`` (an ``OperationalError``) and the caller runs
its own transaction again, or not.

A lock wait that ran out (1205, or 1969 where ``waits.bounded`` set a statement's time)
rolls back one statement only: that is ``waits.LockBusy``, never rerun here. Which errors
are deadlock victims is the dialect's word (``Dialect.deadlock_victim``); the other
databases name none.

Decorate a verb function whose first argument is the alias and which runs one transaction
(or reads, then one transaction): ``@deadlocks.retried``. A decorated verb called while
another runs (``schedules.fire`` enqueues) is part of that one's transaction and leaves a
deadlock to it.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Concatenate

from django.db import DatabaseError, OperationalError, transaction

from .dialects import dialect

#: How many times a transaction runs at most: the first run and its reruns.
ATTEMPTS = 5
#: Seconds of the longest pause before the first rerun (doubling after): a random part of
#: it, so two transactions that deadlocked do not meet again in step.
PAUSE = 0.01

logger = logging.getLogger("django_watchdog.store")

#: Aliases whose store transaction a decorated verb of this thread is running now.
_running: ContextVar[frozenset[str]] = ContextVar("watchdog_deadlock_rule", default=frozenset())


class DeadlockRolledBack(OperationalError):
    """The database rolled back your whole transaction to end a deadlock (it was the
    victim): watchdog's change and your earlier writes in it are gone; run the whole
    transaction again."""


_MESSAGE = " ".join((DeadlockRolledBack.__doc__ or "").split())


def retried[**P, T](verb: Callable[Concatenate[str, P], T]) -> Callable[Concatenate[str, P], T]:
    """``verb(using, ...)`` under the deadlock rule of this module."""

    @functools.wraps(verb)
    def run(using: str, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return run_retried(using, functools.partial(verb, using, *args, **kwargs), verb.__name__)

    return run


def run_retried[T](using: str, work: Callable[[], T], name: str) -> T:
    """``work()``, run again if the server rolled its transaction back as a deadlock
    victim and the store owns that transaction; see the module docstring."""
    running = _running.get()
    if using in running:
        return work()  # part of an outer verb's transaction: the rule is the outer verb's
    if _callers_transaction(using):
        try:
            return work()
        except DeadlockRolledBack:
            raise  # a verb inside this one said so already
        except DatabaseError as error:
            if dialect(using).deadlock_victim(error):
                raise DeadlockRolledBack(f"{_MESSAGE} ({error})") from error
            raise
    token = _running.set(running | {using})
    attempt = 1
    try:
        while True:
            try:
                return work()
            except DatabaseError as error:
                if attempt == ATTEMPTS or not dialect(using).deadlock_victim(error):
                    raise
                logger.warning(
                    "event=deadlock_retried verb=%s database=%s attempt=%d error=%r",
                    name,
                    using,
                    attempt,
                    str(error),
                )
            time.sleep(random.random() * PAUSE * 2 ** (attempt - 1))  # noqa: S311 - jitter
            attempt += 1
    finally:
        _running.reset(token)


def _callers_transaction(using: str) -> bool:
    """Whether a transaction of the caller's is open (or may be: autocommit is off)."""
    connection = transaction.get_connection(using)
    return connection.in_atomic_block or not connection.get_autocommit()
