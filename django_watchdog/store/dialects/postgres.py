"""PostgreSQL: every statement the store runs there, by name, beside the method that binds it.

``PostgresDialect`` is put together from one module per concern, each holding its statements
and the methods that bind them:

- ``postgres_claims``: the clock (``NOW``), queue locks, claim, settle (one and many) and
  queue heads: the hot path;
- ``postgres_enqueue``: enqueue, one or two statements that also settle the queues' heads;
- ``postgres_upkeep``: delayed jobs coming due, the settled feed's positions, idle task
  queues;
- this module: the connection: prepared statements, session settings, the planner's
  estimates and ``LISTEN`` for wake-ups.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

from ...conf import prepared_statements, transaction_pooled
from .base import Dialect, Params, Row
from .postgres_claims import PostgresClaims
from .postgres_enqueue import PostgresEnqueue
from .postgres_exchange import Exchange
from .postgres_upkeep import PostgresUpkeep

#: psycopg prepares a statement only when asked (``prepare=True``): ours.
NEVER_AUTO_PREPARE = 2**31 - 1
#: Statements whose cursor a connection keeps (``driver_cursor``); past this many, the
#: kept ones are closed and kept afresh.
KEPT_CURSORS = 64

#: How long a connection uses the plans its prepared statements have, at most, before the
#: server makes them again (``KeptCursors.replan_if_due``).
REPLAN_SECONDS = 10.0
#: Drop the connection's cached plans; its prepared statements stay, planned on next use.
DISCARD_PLANS = "DISCARD PLANS"

#: The planner's estimate of a query's rows: it reads the table statistics, not the rows.
EXPLAIN_JSON = "EXPLAIN (FORMAT JSON) "


def set_config(count: int) -> str:
    """Session settings (``%(parameter_n)s`` to ``%(value_n)s``), in one statement."""
    calls = (f"set_config(%(parameter_{n})s, %(value_{n})s, false)" for n in range(count))
    return f"SELECT {', '.join(calls)}"


# wake-up

#: ``%(channel)s`` is an identifier: quoted by psycopg's ``sql.Identifier``.
LISTEN = "LISTEN {channel}"


class KeptCursors:
    """One driver connection's cursors, one per statement text (``driver_cursor``), and
    when its plans were last made afresh (``replan_if_due``)."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self.thread = threading.get_ident()
        self.cursors: dict[str, Any] = {}
        self.planned_at = time.monotonic()

    def replan_if_due(self) -> None:
        """Have the server plan this connection's prepared statements afresh on their next
        run (``DISCARD PLANS``) if their plans are ``REPLAN_SECONDS`` old, unless its
        transaction failed (the server would refuse; the caller reports the failure).

        PostgreSQL keeps a prepared statement's generic plan until a change to a table it
        reads invalidates it: one made while the job table was small and analyzed reads
        the whole table for every lookup (on a page or two a scan is cheaper than an
        index), and keeps doing so as the table grows, until autovacuum next analyzes or
        vacuums the table. Made afresh, the plan is made for the table's present size.
        Outside the query hooks, as psycopg's own upkeep of prepared statements is; the
        user's plans on this connection are made afresh too, once each interval."""
        now = time.monotonic()
        if now - self.planned_at < REPLAN_SECONDS:
            return
        from psycopg import pq

        if self.raw.info.transaction_status == pq.TransactionStatus.INERROR:
            return
        self.raw.execute(DISCARD_PLANS)
        self.planned_at = now

    def cursor(self, sql: str) -> Any:
        cursor = self.cursors.get(sql)
        if cursor is None or cursor.closed:
            import psycopg

            if len(self.cursors) >= KEPT_CURSORS:
                for kept in self.cursors.values():
                    kept.close()
                self.cursors.clear()
            cursor = self.cursors[sql] = psycopg.Cursor(self.raw)
        return cursor


class PostgresDialect(PostgresClaims, PostgresEnqueue, PostgresUpkeep):
    vendor = "postgresql"
    WAKE = "notify"
    LOADS_TIMESTAMPTZ = True
    ONE_STATEMENT_CLAIM = True

    def fast_path(self) -> bool:
        """Prepared statements, unless ``conf.prepared_statements()`` says no
        (``PREPARED_STATEMENTS`` off, or behind a transaction pooler)."""
        return prepared_statements()

    @contextmanager
    def driver_cursor(self, connection: Any, sql: str) -> Iterator[Any]:
        """The cursor this connection keeps for ``sql``: psycopg keeps a cursor's loaders
        (one per result column, Django's ``timestamptz`` loader among them) while it runs
        the same statement again, so a job row costs no loader set-up after the first.

        Kept on Django's connection object, for the driver connection and the thread they
        were opened in: a new connection (after a reconnect) keeps cursors of its own, and
        a thread sharing another's connection (Django's live-server tests) gets a cursor of
        its own each time, as two threads must not read one cursor's result. A kept
        cursor holds its statement's last result until it runs again. The connection's
        plans are made afresh every ``REPLAN_SECONDS`` (``KeptCursors.replan_if_due``).
        """
        kept = kept_cursors(connection)
        if kept.thread != threading.get_ident():
            import psycopg

            with psycopg.Cursor(kept.raw) as cursor:
                yield cursor
            return
        kept.replan_if_due()
        yield kept.cursor(sql)

    def _execute_on_driver(
        self, raw: Any, sql: str, params: Params, many: bool, context: Mapping[str, Any]
    ) -> Any:
        return raw.execute(sql, params, prepare=True)

    def pipelined(self) -> bool:
        """On driver cursors only (not while Django logs queries: its cursor would wait for
        each statement's result), and not behind a transaction pooler."""
        if transaction_pooled() or not self.fast_path():
            return False
        return not self.connection.queries_logged

    def fetch_together(self, statements: Sequence[tuple[str, Params]]) -> list[list[Row]]:
        """psycopg's pipeline mode: every statement, then one Sync, in one exchange; the
        server still starts each once the one before has finished (its snapshot follows
        their locks). In autocommit, what comes before the Sync is one implicit
        transaction: committed whole, or rolled back whole by an error."""
        if not self.pipelined():
            return super().fetch_together(statements)
        return self.fetch_pipelined(statements)

    def fetch_pipelined(self, statements: Sequence[tuple[str, Params]]) -> list[list[Row]]:
        """``fetch_together`` for a caller that has found it ``pipelined``: not asked again
        (its settings read twice per job otherwise)."""
        if (exchanged := self._exchanged(statements)) is not None:
            return exchanged
        connection = self.connection
        with connection.wrap_database_errors, ExitStack() as stack:
            sent = [
                stack.enter_context(self.driver_cursor(connection, sql)) for sql, _ in statements
            ]
            connection.validate_no_broken_transaction()
            with connection.connection.pipeline():
                for raw, (sql, params) in zip(sent, statements, strict=True):
                    self.send(connection, raw, sql, params)
            return [_rows(raw) for raw in sent]

    def fetch_in_turn(self, statements: Sequence[tuple[str, Params]]) -> list[list[Row]]:
        """On the connection's ``Exchange`` where it can run, in one exchange (inside
        ``atomic()`` before its first statement, with the transaction's ``BEGIN``);
        elsewhere (a transaction under way) one after another, as psycopg's pipeline mode
        costs more client CPU than the round trips it saves."""
        if self.pipelined() and (exchanged := self._exchanged(statements)) is not None:
            return exchanged
        return Dialect.fetch_together(self, statements)

    def _exchanged(self, statements: Sequence[tuple[str, Params]]) -> list[list[Row]] | None:
        """Each statement's rows, run on the connection's ``Exchange``; ``None`` (nothing
        sent) where it cannot run."""
        connection = self.connection
        with connection.wrap_database_errors:
            if (exchange := self.exchange()) is None:
                return None
            connection.validate_no_broken_transaction()
            return exchange.run(statements)

    def exchange(self) -> Exchange | None:
        """This connection's ``Exchange``, where it can run (``Exchange.usable``): no
        ``execute_wrapper`` hook to pass each statement through, in the thread that opened
        it, in autocommit or inside ``atomic()`` before its first statement; ``None``
        elsewhere. Its plans are made afresh as the cursors' are
        (``KeptCursors.replan_if_due``)."""
        connection = self.connection
        if connection.execute_wrappers:
            return None
        connection.ensure_connection()
        raw = connection.connection
        exchange: Exchange | None = getattr(connection, "_watchdog_exchange", None)
        if exchange is None or exchange.raw is not raw:
            exchange = connection._watchdog_exchange = Exchange(raw)
        if not exchange.usable():
            return None
        kept_cursors(connection).replan_if_due()
        return exchange

    def configure_session(self, values: Sequence[tuple[str, str]]) -> None:
        params: dict[str, str] = {}
        for n, (parameter, value) in enumerate(values):
            params.update({f"parameter_{n}": parameter, f"value_{n}": value})
        self.fetch(set_config(len(values)), params)

    def row_estimate(self, sql: str, params: Sequence[Any]) -> int | None:
        """EXPLAIN's estimate for an ORM query (its own ``%s`` parameters, on Django's
        cursor as the ORM runs it)."""
        import json

        with self.connection.cursor() as cursor:
            cursor.execute(EXPLAIN_JSON + sql, params)
            (plan,) = cursor.fetchone()
        if isinstance(plan, str):
            plan = json.loads(plan)
        return int(plan[0]["Plan"]["Plan Rows"])

    @contextmanager
    def notifications(self, channel: str) -> Iterator[Any]:
        """A connection of its own, listening on ``channel``: ``.notifies(timeout=…)``."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(**self.listen_params(), autocommit=True) as listener:
            listener.execute(sql.SQL(LISTEN).format(channel=sql.Identifier(channel)))
            yield listener

    def listen_params(self) -> dict[str, Any]:
        """psycopg connection arguments for the database behind this alias."""
        settings_dict = self.connection.settings_dict
        params: dict[str, Any] = {"dbname": settings_dict["NAME"] or "postgres"}
        for key, name in (
            ("USER", "user"),
            ("PASSWORD", "password"),
            ("HOST", "host"),
            ("PORT", "port"),
        ):
            if settings_dict.get(key):
                params[name] = settings_dict[key]
        options = settings_dict.get("OPTIONS") or {}
        for key in LISTEN_OPTIONS:
            if key in options:
                params[key] = options[key]
        return params


def kept_cursors(connection: Any) -> KeptCursors:
    """The ``KeptCursors`` of Django's ``connection`` for its present driver connection
    (opened if it was not): a new one after a reconnect."""
    connection.ensure_connection()
    raw = connection.connection
    kept: KeptCursors | None = getattr(connection, "_watchdog_cursors", None)
    if kept is None or kept.raw is not raw:
        if raw.prepare_threshold is None:
            # Django disables preparing; allow it for statements that ask (ours) only.
            raw.prepare_threshold = NEVER_AUTO_PREPARE
        kept = connection._watchdog_cursors = KeptCursors(raw)
    return kept


def _rows(raw: Any) -> list[Row]:
    """The rows a driver cursor's statement returned (none if it returns none). Asked of
    its result's column count: ``description`` builds an object per column on each call."""
    result = raw.pgresult
    return list(raw.fetchall()) if result is not None and result.nfields else []


#: Connection options a listening connection takes from the database's ``OPTIONS``.
LISTEN_OPTIONS = (
    "sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "service", "passfile",
    "options", "application_name",
)  # fmt: skip
