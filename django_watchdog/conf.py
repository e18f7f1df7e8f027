"""The one ``WATCHDOG`` settings dict, read lazily so ``override_settings`` reaches it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .domain import validation
from .domain.errors import InvalidInput

DEFAULTS: dict[str, Any] = {
    # Largest payload accepted by enqueue(), in bytes of canonical JSON.
    "MAX_PAYLOAD_BYTES": 1024 * 1024,
    # Seconds an idle worker sleeps between polls (SQLite, or PostgreSQL's fallback).
    "POLL_INTERVAL": 0.5,
    # Seconds between a worker's heartbeats; also how often it re-reads cancellations.
    "HEARTBEAT_INTERVAL": 2.0,
    # Seconds without a heartbeat after which a worker's running jobs are recovered.
    "WORKER_TIMEOUT": 30.0,
    # Seconds running jobs get to finish after SIGTERM/SIGINT.
    "SHUTDOWN_GRACE": 30.0,
    # Seconds a timed-out handler gets after cancel_requested turns on before its job
    # settles outcome_unknown and its worker slot is freed.
    "TIMEOUT_GRACE": 5.0,
    # Jobs a worker's job thread claims at once and runs one after another, writing their
    # results together with its next claim (manage.py watchdog_worker --batch). 1 claims
    # one job at a time; more means fewer transactions per job, for many short jobs.
    "BATCH": 1,
    # PostgreSQL: prepare watchdog's own statements once per connection. None: yes, unless
    # TRANSACTION_POOLER (PgBouncer before 1.21 cannot keep them in transaction mode).
    "PREPARED_STATEMENTS": None,
    # PostgreSQL LISTEN/NOTIFY channel that wakes idle workers.
    "NOTIFY_CHANNEL": "django_watchdog",
    # PostgreSQL reached through a pooler in transaction mode (PgBouncer's
    # pool_mode = transaction): workers set no session settings, prepare no statements
    # (unless PREPARED_STATEMENTS is True) and LISTEN only through LISTEN_DATABASE.
    "TRANSACTION_POOLER": False,
    # The alias of a direct (unpooled, or session-pooled) connection to the same database,
    # on which workers LISTEN for wake-ups. None: the worker's own database, unless
    # TRANSACTION_POOLER (then workers poll every POLL_INTERVAL).
    "LISTEN_DATABASE": None,
    # PostgreSQL: seconds a worker's own transaction (recovery, due jobs, settles,
    # heartbeats, schedules, retention, statistics) waits for a lock another transaction holds; past
    # it that step is skipped and tried again on a later pass (SET LOCAL lock_timeout).
    "LOCK_TIMEOUT": 2.0,
    # PostgreSQL, set on each worker connection (None leaves the server's value): the server
    # ends a worker's transaction left idle this many seconds (a stopped or cut-off worker),
    # releasing its locks (idle_in_transaction_session_timeout).
    "IDLE_IN_TRANSACTION_TIMEOUT": 60.0,
    # ...and notices a worker's connection is dead without waiting for the operating
    # system's defaults (about two hours): keepalive probes after this many idle seconds,
    # every TCP_KEEPALIVES_INTERVAL seconds, TCP_KEEPALIVES_COUNT unanswered ones end it;
    # data unacknowledged for TCP_USER_TIMEOUT seconds ends it too.
    "TCP_KEEPALIVES_IDLE": 30,
    "TCP_KEEPALIVES_INTERVAL": 10,
    "TCP_KEEPALIVES_COUNT": 3,
    "TCP_USER_TIMEOUT": 60.0,
    # Settled jobs older than this (seconds or a timedelta) are pruned; None keeps them forever.
    "RETENTION": None,
    # How long a pruned job's id stays taken after the job settled (seconds or a
    # timedelta, at least RETENTION): enqueueing it again is a duplicate. None: an id is
    # free again once its job is pruned (the idempotency window is RETENTION).
    "ID_RETENTION": None,
    # Periodic schedules: name -> options of django_watchdog.schedules.schedule().
    "SCHEDULES": {},
}


def setting(name: str) -> Any:
    """The value of ``WATCHDOG[name]``, or its default."""
    configured = getattr(settings, "WATCHDOG", None) or {}
    if name in configured:
        return configured[name]
    return DEFAULTS[name]


def seconds(name: str) -> float:
    """``WATCHDOG[name]`` as a finite, positive number of seconds (at most a year).

    Raises ``ImproperlyConfigured`` naming the setting (``manage.py check`` reports the
    same as ``django_watchdog.E003``).
    """
    try:
        return validation.interval(setting(name), f"WATCHDOG[{name!r}]")
    except InvalidInput as error:
        raise ImproperlyConfigured(str(error)) from error


def age(name: str) -> timedelta | None:
    """``WATCHDOG[name]`` (seconds or a ``timedelta``) as a ``timedelta``, or ``None``.

    Raises ``ImproperlyConfigured`` naming the setting for anything but ``None`` or a
    positive age of at most 1,000 years (``django_watchdog.E010``).
    """
    value = setting(name)
    if value is None:
        return None
    try:
        return validation.age(value, f"WATCHDOG[{name!r}]")
    except InvalidInput as error:
        raise ImproperlyConfigured(str(error)) from error


def transaction_pooled() -> bool:
    """Whether ``WATCHDOG['TRANSACTION_POOLER']`` declares a pooler in transaction mode."""
    return setting("TRANSACTION_POOLER") is True


def prepared_statements() -> bool:
    """Whether to prepare watchdog's statements: ``PREPARED_STATEMENTS``, or when it is
    ``None``, unless behind a transaction pooler."""
    configured = setting("PREPARED_STATEMENTS")
    if configured is None:
        return not transaction_pooled()
    return bool(configured)


def listen_alias(using: str) -> str | None:
    """The alias a worker of ``using`` LISTENs on; ``None``: no LISTEN (it polls)."""
    configured = setting("LISTEN_DATABASE")
    if configured is not None:
        return str(configured)
    return None if transaction_pooled() else using
