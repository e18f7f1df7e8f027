"""The worker's own PostgreSQL sessions: settings that let the server end what a stalled
or cut-off worker leaves behind.

A worker stopped (SIGSTOP, a hung host) or cut off by the network inside a transaction
keeps its locks for as long as the server keeps its session; with TCP's defaults that
can be hours. Each connection a worker process opens is set (for its session) so the
server ends a transaction left idle (``idle_in_transaction_session_timeout``) and notices
a dead peer (``tcp_keepalives_*``, ``tcp_user_timeout``): the locks go, the worker's claims
are recovered once its heartbeat stops. Only a worker's connections are set (the web
process keeps the server's values), from ``WATCHDOG`` settings; ``None`` leaves one as the
server has it. Keepalive settings do nothing on a Unix-domain socket (the server says so
by reading them back as 0).
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.signals import connection_created

from ..conf import setting, transaction_pooled
from .dialects import dialect, dialect_class

#: (PostgreSQL parameter, WATCHDOG setting, the parameter's unit per second of the setting;
#: 0 for a plain count).
SESSION_PARAMETERS = (
    ("idle_in_transaction_session_timeout", "IDLE_IN_TRANSACTION_TIMEOUT", 1000),
    ("tcp_keepalives_idle", "TCP_KEEPALIVES_IDLE", 1),
    ("tcp_keepalives_interval", "TCP_KEEPALIVES_INTERVAL", 1),
    ("tcp_keepalives_count", "TCP_KEEPALIVES_COUNT", 0),
    ("tcp_user_timeout", "TCP_USER_TIMEOUT", 1000),
)


def worker_session() -> list[tuple[str, str]]:
    """(parameter, value) of each worker session setting that is configured (not ``None``)."""
    values = []
    for parameter, name, per_second in SESSION_PARAMETERS:
        value = setting(name)
        if value is None:
            continue
        amount = round(float(value) * per_second) if per_second else round(value)
        values.append((parameter, str(max(1, amount))))
    return values


def configure(connection: BaseDatabaseWrapper) -> None:
    """Apply the worker session settings to ``connection`` (where the database has them).

    Behind a transaction pooler (``TRANSACTION_POOLER``) nothing: the session belongs to
    the pool, so a setting would reach other clients and miss our next transaction. Set
    them for the pooler's role or in the pooler instead (see the deploy how-to)."""
    if dialect_class(connection) is None or transaction_pooled():
        return
    values = worker_session()
    if values:
        dialect(connection.alias).configure_session(values)


def configure_worker_connections(using: str) -> None:
    """From now on, give every connection this process opens to ``using`` the worker
    session settings (and the one this thread has open, if any)."""

    def on_connect(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
        if connection.alias == using:
            configure(connection)

    connection_created.connect(
        on_connect, weak=False, dispatch_uid=f"django_watchdog.worker_session.{using}"
    )
    if connections[using].connection is not None:
        configure(connections[using])
