"""System checks for PostgreSQL behind a connection pooler in transaction mode (PgBouncer
``pool_mode = transaction``): they say what cannot work there.

In that mode consecutive transactions of one Django connection may run on different server
sessions, and a session outlives its client. So anything set for a session either leaks to
another client or is lost: watchdog then sets no session settings on its worker connections
(``store.sessions``), bounds its lock waits per transaction only (``set_config(..., true)``,
as always), prepares no statements unless told to (psycopg names them per client; PgBouncer
before 1.21 hands them to the wrong session), and ``LISTEN``s only on a direct connection
(``LISTEN_DATABASE``), else polls (``conf.transaction_pooled``, ``conf.prepared_statements``,
``conf.listen_alias``).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks


def check_pooler(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``TRANSACTION_POOLER``, ``LISTEN_DATABASE`` and ``PREPARED_STATEMENTS`` (E015,
    W004-W007)."""
    configured = getattr(settings, "WATCHDOG", None)
    if not isinstance(configured, dict):
        return []
    messages: list[checks.CheckMessage] = []
    pooled = configured.get("TRANSACTION_POOLER", False)
    listen = configured.get("LISTEN_DATABASE")
    prepared = configured.get("PREPARED_STATEMENTS")
    if not isinstance(pooled, bool):
        messages.append(_error("WATCHDOG['TRANSACTION_POOLER'] must be True or False."))
    if prepared is not None and not isinstance(prepared, bool):
        messages.append(_error("WATCHDOG['PREPARED_STATEMENTS'] must be None, True or False."))
    if listen is not None and listen not in settings.DATABASES:
        messages.append(
            _error(
                f"WATCHDOG['LISTEN_DATABASE'] must name a database alias; {listen!r} is not "
                f"one of {', '.join(sorted(settings.DATABASES))}."
            )
        )
        listen = None
    if messages or pooled is not True:
        return messages
    pooled_aliases = [
        alias
        for alias, database in settings.DATABASES.items()
        if "postgresql" in database.get("ENGINE", "") and alias != listen
    ]
    if listen is None:
        messages.append(
            checks.Warning(
                "WATCHDOG['TRANSACTION_POOLER'] is on and no LISTEN_DATABASE is set: "
                "workers cannot LISTEN through the pooler and wake only every POLL_INTERVAL.",
                hint="Add a DATABASES entry that reaches PostgreSQL directly (or a "
                "session-mode pool) and name it in WATCHDOG['LISTEN_DATABASE'].",
                id="django_watchdog.W004",
            )
        )
    else:
        direct = _address(settings.DATABASES[listen])
        through = [a for a in pooled_aliases if _address(settings.DATABASES[a]) == direct]
        if through:
            messages.append(
                checks.Warning(
                    f"WATCHDOG['LISTEN_DATABASE'] ({listen!r}) has the host and port of "
                    f"{', '.join(repr(a) for a in through)}, which TRANSACTION_POOLER says "
                    "is pooled in transaction mode: LISTEN does not work there.",
                    hint="Point LISTEN_DATABASE at PostgreSQL itself or a session-mode pool.",
                    id="django_watchdog.W005",
                )
            )
    for alias in pooled_aliases:
        database = settings.DATABASES[alias]
        if not database.get("DISABLE_SERVER_SIDE_CURSORS"):
            messages.append(
                checks.Warning(
                    f"DATABASES[{alias!r}] is pooled in transaction mode without "
                    "DISABLE_SERVER_SIDE_CURSORS = True.",
                    hint="Django's QuerySet.iterator() outside a transaction needs it there.",
                    id="django_watchdog.W006",
                )
            )
        options: Any = database.get("OPTIONS") or {}  # typed per driver by django-stubs
        if options.get("prepare_threshold") is not None or prepared is True:
            messages.append(
                checks.Warning(
                    f"DATABASES[{alias!r}] is pooled in transaction mode and prepared "
                    "statements are on (OPTIONS['prepare_threshold'] or "
                    "WATCHDOG['PREPARED_STATEMENTS']).",
                    hint="Only PgBouncer 1.21 or newer with max_prepared_statements > 0 "
                    "keeps them; otherwise statements fail with 'prepared statement ... "
                    "already exists' or 'does not exist'.",
                    id="django_watchdog.W007",
                )
            )
    return messages


def _address(database: Any) -> tuple[str, str]:
    return (str(database.get("HOST") or ""), str(database.get("PORT") or ""))


def _error(message: str) -> checks.CheckMessage:
    return checks.Error(message, id="django_watchdog.E015")
