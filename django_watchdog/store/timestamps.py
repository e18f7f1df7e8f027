"""Timestamps a row holds that Python cannot: read as ``UnreadableTimestamp``, not as an
error that fails the whole result.

PostgreSQL's ``timestamptz`` reaches years Python's ``datetime`` does not (years 1–9999).
A row edited by hand, or written before ``run_after`` was validated, can hold such an
instant; psycopg's loader then raises for the whole result set, so one row would stop
every claim, recovery pass, feed read and admin page that fetched it. Each PostgreSQL
connection watchdog's app sees gets a loader that returns the nearest instant Python holds,
marked as unreadable, so ``domain.as_stored.check_decodes`` can name the job and the store
quarantine it (SPEC §4.14).
"""

from __future__ import annotations

from typing import Any

from ..domain.timestamps import UnreadableTimestamp
from .dialects import dialect_class


def install_lenient_loader(sender: Any, connection: Any, **kwargs: Any) -> None:
    """``connection_created`` receiver: on a psycopg 3 connection, wrap Django's
    ``timestamptz`` loader so an out-of-range value loads as an ``UnreadableTimestamp``.

    The wrapper keeps Django's loader's ``timezone``, so Django sees its own loader still in
    place and does not register another per cursor.
    """
    cls = dialect_class(connection)
    if cls is None or not cls.LOADS_TIMESTAMPTZ:
        return
    try:
        import psycopg
        from psycopg.postgres import types
        from psycopg.pq import Format
    except ImportError:  # psycopg2: this guard is psycopg 3's
        return
    adapters = getattr(connection.connection, "adapters", None)
    if adapters is None:
        return
    oid = types["timestamptz"].oid
    base = adapters.get_loader(oid, Format.TEXT)
    if base is None or getattr(base, "watchdog_lenient", False):
        return

    class LenientTimestamptzLoader(base):  # type: ignore[misc,valid-type]
        watchdog_lenient = True

        def load(self, data: Any) -> Any:
            try:
                return super().load(data)
            except psycopg.DataError as error:
                text = bytes(data).decode("utf-8", "replace")
                return UnreadableTimestamp.of(text, too_large="small" not in str(error))

    adapters.register_loader(oid, LenientTimestamptzLoader)
