"""Watchdog's large backlog, generated in SQL: 99,000 jobs behind one busy queue and
1,000,000 settled rows (counts are arguments), for the backlog-flatness drain.

Rows are not invented column by column: each generated row is a copy of a row the public
API wrote (a queued job behind the busy queue, a settled job from the empty-table drain, a
queue row), with only its identity changed (id = position, job_id, queue, feed position).
Whatever columns the store has when the benchmark runs, the copies carry the values the
store itself chose. Runs inside the watchdog Django settings (bench.driver).
"""

from __future__ import annotations

import time
from typing import Any

from django.db import connection, transaction

import django_watchdog as wd
from django_watchdog.models import Job

BUSY = "busy"
HISTORY_QUEUES = 1000


def _columns(table: str) -> list[str]:
    with connection.cursor() as cursor:
        return [c.name for c in connection.introspection.get_table_description(cursor, table)]


def _series(count: int) -> str:
    """A row source ``s(g)`` for g = 1..count (and ``s.id``, a fresh job id, for jobs)."""
    if connection.vendor == "postgresql":
        return (
            "(SELECT nextval(pg_get_serial_sequence('watchdog_job', 'id')) AS id, g "
            f"FROM generate_series(1, {int(count)}) AS g) AS s"
        )
    return "s"


def _clone(table: str, key: str, template: Any, count: int, overrides: dict[str, str]) -> int:
    """Insert ``count`` copies of ``table``'s row ``key = template``, with ``overrides``."""
    columns = _columns(table)
    exprs = ", ".join(overrides.get(c, f't."{c}"') for c in columns)
    names = ", ".join(f'"{c}"' for c in columns)
    source = f'(SELECT * FROM {table} WHERE "{key}" = %s) AS t'
    if connection.vendor == "postgresql":
        rows = f"{_series(count)} CROSS JOIN {source}"
        sql = f"INSERT INTO {table} ({names}) SELECT {exprs} FROM {rows}"
    else:
        with connection.cursor() as cursor:
            cursor.execute("SELECT COALESCE(MAX(id), 0) FROM watchdog_job")
            base = int(cursor.fetchone()[0])
        sql = (
            f"INSERT INTO {table} ({names}) WITH RECURSIVE s(g) AS "
            f"(SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < {int(count)}) "
            f"SELECT {exprs} FROM (SELECT g, {base} + g AS id FROM s) AS s CROSS JOIN {source}"
        )
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
            {"id": "s.id", "position": "s.id", "job_id": "'busy-' || s.g"},
        )
        made_queues = _clone(
            "watchdog_queue", "name", BUSY, HISTORY_QUEUES, {"name": "'hist-' || (s.g - 1)"}
        )
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO watchdog_feed_clock (id, last_position) VALUES (1, 0) "
                "ON CONFLICT (id) DO NOTHING"
            )
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
                "job_id": "'hist-' || s.g",
                "queue": f"'hist-' || (s.g %% {HISTORY_QUEUES})",
                "feed_position": f"{clock} + s.g",
            },
        )
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE watchdog_feed_clock SET last_position = last_position + %s WHERE id = 1",
                [made_settled],
            )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE watchdog_job")
            cursor.execute("ANALYZE watchdog_queue")
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
