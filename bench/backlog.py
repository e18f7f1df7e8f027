"""Watchdog's large backlog, generated in SQL: 99,000 jobs behind one busy queue and
1,000,000 settled rows (counts are arguments), for the backlog-flatness drain.

Rows are not invented column by column: each generated row is a copy of a row the public
API wrote (a queued job behind the busy queue, a settled job from the empty-table drain, a
queue row), with only its identity changed (id = position, job_id, queue, feed position).
Whatever columns the store has when the benchmark runs, the copies carry the values the
store itself chose. Row sources: ``generate_series`` on PostgreSQL, the SEQUENCE engine's
``seq_1_to_N`` on MariaDB, a recursive CTE on SQLite. Runs inside the watchdog Django
settings (bench.driver).
"""

from __future__ import annotations

import time
from typing import Any

from django.db import connection, transaction

import django_watchdog as wd
from django_watchdog.models import Job

BUSY = "busy"
HISTORY_QUEUES = 1000


START_CLOCK = (
    "INSERT INTO watchdog_feed_clock (id, last_position) VALUES (1, 0) ON CONFLICT (id) DO NOTHING"
)
START_CLOCK_MARIADB = "INSERT IGNORE INTO watchdog_feed_clock (id, last_position) VALUES (1, 0)"
#: MariaDB's generated columns (migration 0009) take no value in an INSERT.
MARIADB_WRITABLE_COLUMNS = (
    "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() "
    "AND table_name = %s AND is_generated = 'NEVER' ORDER BY ordinal_position"
)


def _columns(table: str) -> list[str]:
    """The columns an INSERT may write, in table order."""
    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute(MARIADB_WRITABLE_COLUMNS, [table])
            return [row[0] for row in cursor.fetchall()]
        return [c.name for c in connection.introspection.get_table_description(cursor, table)]


def _text(prefix: str, number: str) -> str:
    """SQL for the text ``prefix`` followed by the number ``number``."""
    if connection.vendor == "mysql":
        return f"CONCAT('{prefix}', {number})"
    return f"'{prefix}' || {number}"


def _next_ids(count: int) -> str:
    """A row source ``s`` of g = 1..count, with ``s.id``, a fresh job id, for each g."""
    if connection.vendor == "postgresql":
        return (
            "(SELECT nextval(pg_get_serial_sequence('watchdog_job', 'id')) AS id, g "
            f"FROM generate_series(1, {int(count)}) AS g) AS s"
        )
    with connection.cursor() as cursor:
        cursor.execute("SELECT COALESCE(MAX(id), 0) FROM watchdog_job")
        base = int(cursor.fetchone()[0])
    if connection.vendor == "mysql":  # MariaDB's SEQUENCE engine: seq_1_to_N is a table
        return f"(SELECT seq AS g, {base} + seq AS id FROM seq_1_to_{int(count)}) AS s"
    return f"(SELECT g, {base} + g AS id FROM s) AS s"


def _clone(table: str, key: str, template: Any, count: int, overrides: dict[str, str]) -> int:
    """Insert ``count`` copies of ``table``'s row ``key = template``, with ``overrides``."""
    quote = connection.ops.quote_name
    columns = _columns(table)
    exprs = ", ".join(overrides.get(c, f"t.{quote(c)}") for c in columns)
    names = ", ".join(quote(c) for c in columns)
    source = f"(SELECT * FROM {table} WHERE {quote(key)} = %s) AS t"
    rows = f"{_next_ids(count)} CROSS JOIN {source}"
    if connection.vendor == "sqlite":
        sql = (
            f"INSERT INTO {table} ({names}) WITH RECURSIVE s(g) AS "
            f"(SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < {int(count)}) "
            f"SELECT {exprs} FROM {rows}"
        )
    else:
        sql = f"INSERT INTO {table} ({names}) SELECT {exprs} FROM {rows}"
    with connection.cursor() as cursor:
        cursor.execute(sql, [template])
        return int(cursor.rowcount)


def busy(args: dict[str, Any]) -> dict[str, Any]:
    """The long-running job that occupies the busy queue (a bench-sleep worker runs it)."""
    wd.enqueue("busy-head", queue=BUSY, lane="bench-sleep", payload=float(args["hold"]))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if wd.queue_head(BUSY).state == "running":
            return {"head": "running"}
        time.sleep(0.05)
    raise SystemExit("the busy queue's head never started running")


def fill(args: dict[str, Any]) -> dict[str, Any]:
    queued, settled = int(args["queued"]), int(args["settled"])
    started = time.perf_counter()
    template = Job.objects.filter(state="settled", outcome="completed").order_by("id").first()
    if template is None:
        raise SystemExit("no settled job to copy: run the empty-table drain first")
    with transaction.atomic():
        wd.enqueue("busy-0", queue=BUSY, lane="bench", payload="busy-0")
        behind = Job.objects.get(job_id="busy-0")
        made_queued = 1 + _clone(
            "watchdog_job",
            "id",
            behind.id,
            queued - 1,
            {"id": "s.id", "position": "s.id", "job_id": _text("busy-", "s.g")},
        )
        made_queues = _clone(
            "watchdog_queue", "name", BUSY, HISTORY_QUEUES, {"name": _text("hist-", "(s.g - 1)")}
        )
        with connection.cursor() as cursor:
            cursor.execute(START_CLOCK_MARIADB if connection.vendor == "mysql" else START_CLOCK)
            cursor.execute("SELECT last_position FROM watchdog_feed_clock WHERE id = 1")
            clock = int(cursor.fetchone()[0])
        made_settled = _clone(
            "watchdog_job",
            "id",
            template.id,
            settled,
            {
                "id": "s.id",
                "position": "s.id",
                "job_id": _text("hist-", "s.g"),
                "queue": _text("hist-", f"(s.g %% {HISTORY_QUEUES})"),
                "feed_position": f"{clock} + s.g",
            },
        )
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE watchdog_feed_clock SET last_position = last_position + %s WHERE id = 1",
                [made_settled],
            )
    if connection.vendor in ("postgresql", "mysql"):
        table = "TABLE " if connection.vendor == "mysql" else ""
        with connection.cursor() as cursor:
            for name in ("watchdog_job", "watchdog_queue"):
                cursor.execute(f"ANALYZE {table}{name}")
                if connection.vendor == "mysql":
                    cursor.fetchall()  # ANALYZE TABLE answers with a row per table
    head = wd.queue_head(BUSY)
    assert head.state == "running", head
    counts = {
        "queued": Job.objects.filter(state="queued").count(),
        "settled": Job.objects.filter(state="settled").count(),
        "running": Job.objects.filter(state="running").count(),
        "ready": Job.objects.filter(ready=True).count(),
    }
    return {
        "made_queued": made_queued,
        "made_queues": made_queues,
        "made_settled": made_settled,
        "counts": counts,
        "seconds": time.perf_counter() - started,
    }


def run(op: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"flat_busy": busy, "flat_fill": fill}[op](args)
