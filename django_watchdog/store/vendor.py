"""Where SQLite and PostgreSQL differ: row locks, the queue lock and wake-up notifications."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connections
from django.db.models import DateTimeField, FloatField, Func, Value

from ..conf import prepared_statements, setting
from . import waits


def is_postgres(using: str) -> bool:
    return connections[using].vendor == "postgresql"


def param_datetime(using: str, value: datetime | None) -> Any:
    """A datetime as this database's driver wants it (SQLite: the ORM's text form)."""
    if value is None:
        return None
    return connections[using].ops.adapt_datetimefield_value(value)


def param_json(using: str, value: Any) -> Any:
    """A JSON value for a JSON column; ``None`` stays SQL NULL, as the ORM stores it."""
    if value is None:
        return None
    return connections[using].ops.adapt_json_value(value, None)


@cache
def _render(sql: str, vendor: str) -> str:
    if "<" not in sql:
        return sql
    from . import rows

    rendered = rows.expand(sql)
    if vendor == "postgresql":
        # PostgreSQL folds "x = TRUE" into "x", the form of its partial-index predicates.
        rendered = rendered.replace("<TRUE>", "TRUE").replace("<FALSE>", "FALSE")
        return rendered.replace("<NOW>", "clock_timestamp()")
    # SQLite uses a partial index only if the query repeats its predicate term for term,
    # and Django writes that term as "x" (5.2) or "x = 1" (6.x): state both.
    rendered = _FLAG_TRUE.sub(r"(\1 AND \1 = 1)", rendered)
    rendered = _FLAG_FALSE.sub(r"(NOT \1 AND \1 = 0)", rendered)
    return rendered.replace("<NOW>", "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')")


_FLAG_TRUE = re.compile(r"(\b[\w.]+) = <TRUE>")
_FLAG_FALSE = re.compile(r"(\b[\w.]+) = <FALSE>")


def render(using: str, sql: str) -> str:
    """``sql`` for this database: ``<COLUMNS>`` filled in, ``<TRUE>``/``<FALSE>`` spelt so
    the planner matches the partial indexes (SQLite compares ``ready = 1`` literally), and
    ``<NOW>`` the database's clock: one clock orders every job timestamp, whichever
    machine wrote it, and a settle always stamps before the claim it makes possible."""
    return _render(sql, connections[using].vendor)


NEVER_AUTO_PREPARE = 2**31 - 1


@contextmanager
def _cursor(using: str) -> Iterator[Any]:
    """A cursor of the driver itself, on Django's connection, for watchdog's own statements.

    Django's cursor wrapper costs more than a short statement does (on SQLite it rewrites
    ``%s`` placeholders with a regular expression on every call); ours are written once,
    so they are converted once. On PostgreSQL (unless ``conf.prepared_statements()`` says
    no: ``PREPARED_STATEMENTS`` off, or behind a transaction pooler) the psycopg cursor
    prepares each named statement once per connection: planning the claim and settle
    statements costs ~10x their execution. Errors still surface as
    ``django.db`` exceptions, a transaction marked for rollback still refuses them, and the
    transaction is Django's.
    """
    connection = connections[using]
    if connection.vendor == "postgresql" and not prepared_statements():
        with connection.cursor() as cursor:
            yield cursor
        return
    with connection.wrap_database_errors:
        connection.ensure_connection()
        raw = connection.connection
        if connection.vendor == "postgresql":
            import psycopg

            if raw.prepare_threshold is None:
                # Django disables preparing; allow it for statements that ask (ours) only.
                raw.prepare_threshold = NEVER_AUTO_PREPARE
            with psycopg.Cursor(raw) as prepared:
                yield prepared
            return
        plain = raw.cursor()
        try:
            yield plain
        finally:
            plain.close()


def _run(cursor: Any, using: str, sql: str, params: Sequence[Any]) -> None:
    """Execute on ``cursor``; psycopg cursors prepare the statement (once per connection)."""
    connection = connections[using]
    if connection.vendor != "postgresql":
        connection.validate_no_broken_transaction()
        cursor.execute(_qmark(render(using, sql)), params)
    elif isinstance(cursor, _psycopg_cursor_class()):
        connection.validate_no_broken_transaction()
        cursor.execute(render(using, sql), params, prepare=True)
    else:
        cursor.execute(render(using, sql), params)


@cache
def _qmark(sql: str) -> str:
    """``sql`` in sqlite3's placeholder style, as Django's SQLite cursor rewrites it."""
    return _FORMAT_PLACEHOLDER.sub("?", sql).replace("%%", "%")


_FORMAT_PLACEHOLDER = re.compile(r"(?<!%)%s")


@cache
def _psycopg_cursor_class() -> type[Any]:
    try:
        import psycopg
    except ImportError:  # pragma: no cover - SQLite-only installs
        return type(None)
    return psycopg.Cursor


def execute(using: str, sql: str, params: Sequence[Any] = ()) -> int:
    """Run one statement; return its row count."""
    with _cursor(using) as cursor:
        _run(cursor, using, sql, params)
        return int(cursor.rowcount)


def fetch(using: str, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    with _cursor(using) as cursor:
        _run(cursor, using, sql, params)
        return list(cursor.fetchall())


LOCK_QUEUE = "SELECT 1 FROM watchdog_queue WHERE name = %s FOR UPDATE"
BOUND_LOCK_WAITS = "SELECT set_config('lock_timeout', %s, true)"


def bound_lock_waits(using: str) -> None:
    """In a bounded block (``waits.bounded``), bound every lock wait for the rest of the
    caller's transaction (PostgreSQL; SQLite's busy timeout bounds its waits already)."""
    seconds = waits.limit()
    if seconds is not None and is_postgres(using):
        fetch(using, BOUND_LOCK_WAITS, (waits.milliseconds(seconds),))


def lock_queue(using: str, queue: str) -> None:
    """Serialise every change to ``queue`` until this transaction ends.

    On PostgreSQL this is the queue row's lock; on SQLite the write transaction already
    excludes every other writer.
    """
    if is_postgres(using):
        bound_lock_waits(using)
        fetch(using, LOCK_QUEUE, (queue,))


LOCK_QUEUE_OF_JOB = """
SELECT q.name FROM watchdog_queue q
 WHERE q.name = (SELECT j.queue FROM watchdog_job j WHERE j.job_id = %s)
   FOR UPDATE OF q
"""
#: The same, first bounding lock waits for the rest of the transaction: the settle's first
#: statement, so a bounded settle costs no extra round trip. The row is locked above the
#: join, so ``bound`` is evaluated before the lock is waited for.
LOCK_QUEUE_OF_JOB_BOUNDED = """
WITH bound AS MATERIALIZED (SELECT set_config('lock_timeout', %s, true) AS lock_timeout)
SELECT q.name FROM bound, watchdog_queue q
 WHERE q.name = (SELECT j.queue FROM watchdog_job j WHERE j.job_id = %s)
   FOR UPDATE OF q
"""
QUEUE_OF_JOB = "SELECT queue FROM watchdog_job WHERE job_id = %s"


def lock_queue_of(using: str, job_id: str) -> str | None:
    """Lock the queue of ``job_id`` (one round trip) and return its name; ``None`` if no job."""
    if not is_postgres(using):
        rows = fetch(using, QUEUE_OF_JOB, (job_id,))
    elif (seconds := waits.limit()) is not None:
        rows = fetch(using, LOCK_QUEUE_OF_JOB_BOUNDED, (waits.milliseconds(seconds), job_id))
    else:
        rows = fetch(using, LOCK_QUEUE_OF_JOB, (job_id,))
    return str(rows[0][0]) if rows else None


LOCK_QUEUES_POSTGRES = """
SELECT name FROM watchdog_queue WHERE name = ANY(%s::text[]) ORDER BY name FOR UPDATE
"""


def lock_queues(using: str, queues: Sequence[str]) -> None:
    """Lock several queues in name order, so two multi-queue changes cannot deadlock."""
    names = sorted(set(queues))
    if is_postgres(using):
        bound_lock_waits(using)
        fetch(using, LOCK_QUEUES_POSTGRES, (names,))


def notify(using: str, lane: str) -> None:
    """Wake idle workers of ``lane`` once this transaction commits (PostgreSQL only)."""
    if is_postgres(using):
        fetch(using, "SELECT pg_notify(%s, %s)", (setting("NOTIFY_CHANNEL"), lane))


#: Rows per multi-row statement: a statement repeated with the same text is prepared once,
#: so short ones win (SQLite 3.40: 2,000 rows took 7.3 ms as 20 statements of 100 and
#: 9.6 ms as 2 of 1,000).
ROWS_PER_STATEMENT = 100


def fetch_rows(
    using: str,
    template: str,
    row: str,
    rows: Sequence[Sequence[Any]],
    extra: Sequence[Any] = (),
) -> list[tuple[Any, ...]]:
    """SQLite: run ``template`` for ``rows``, its ``{rows}`` filled with one ``row``
    (placeholders) per row and ``extra`` bound after them; the rows every statement
    returned. (PostgreSQL binds one array per column instead.)

    As many rows per statement as the library binds (the limit is a SQLite build option:
    32,766 by default, 999 before 3.32), at most ``ROWS_PER_STATEMENT``. Only the fixed
    pieces are rendered (and cached), never a text that varies with the number of rows.
    """
    import sqlite3

    connection = connections[using]
    head, one, tail = _pieces(template, row, connection.vendor)
    found: list[tuple[Any, ...]] = []
    with _cursor(using) as cursor:
        limit = int(connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
        step = max(1, min(ROWS_PER_STATEMENT, (limit - len(extra)) // row.count("%s")))
        for start in range(0, len(rows), step):
            chunk = rows[start : start + step]
            connection.validate_no_broken_transaction()
            cursor.execute(
                head + ", ".join([one] * len(chunk)) + tail,
                [*(value for values in chunk for value in values), *extra],
            )
            found.extend(cursor.fetchall())
    return found


@cache
def _pieces(template: str, row: str, vendor: str) -> tuple[str, str, str]:
    head, tail = template.split("{rows}")
    return (
        _qmark(_render(head, vendor)),
        _qmark(_render(row, vendor)),
        _qmark(_render(tail, vendor)),
    )


def lane_predicate(
    column: str, lanes: Sequence[str], exclude_lanes: Sequence[str]
) -> tuple[str, list[str]]:
    """SQL restricting ``column`` to a worker's lane partition."""
    clauses: list[str] = []
    params: list[str] = []
    if lanes:
        clauses.append(f"{column} IN ({', '.join(['%s'] * len(lanes))})")
        params.extend(lanes)
    if exclude_lanes:
        clauses.append(f"{column} NOT IN ({', '.join(['%s'] * len(exclude_lanes))})")
        params.extend(exclude_lanes)
    return (" AND ".join(clauses) or "1 = 1"), params


class DatabaseClock(Func):
    """The database's clock (``<NOW>``), ``seconds_ago`` seconds back: an expression to
    stamp or compare a datetime column with. On SQLite it is the text ``<NOW>`` writes, which
    orders as the ORM's own text does."""

    output_field = DateTimeField()
    template = "clock_timestamp() - make_interval(secs => %(expressions)s)"

    def __init__(self, seconds_ago: float = 0.0) -> None:
        super().__init__(Value(float(seconds_ago), output_field=FloatField()))

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = (
            "strftime('%%%%Y-%%%%m-%%%%d %%%%H:%%%%M:%%%%f', 'now', "
            "printf('-%%%%.6f seconds', %(expressions)s))"
        )
        return self.as_sql(compiler, connection, template=template, **extra)


class SecondsSince(Func):
    """Seconds from a datetime column (or expression) to the database's clock: a float."""

    output_field = FloatField()
    template = "EXTRACT(EPOCH FROM clock_timestamp() - %(expressions)s)::float8"

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        template = "(julianday('now') - julianday(%(expressions)s)) * 86400.0"
        return self.as_sql(compiler, connection, template=template, **extra)
