"""Watchdog's large backlog, generated in SQL: jobs behind one busy queue and a settled
history (counts are arguments), for the flatness workload (bench/flatness.py).

Rows are not invented column by column: each generated row is a copy of a row the public
API wrote (a queued job behind the busy queue, a settled job from the empty-table drain, a
queue row), with only its identity changed (id = position, job_id, queue, feed position)
and, for the history, its times moved back one second per row, so that the oldest tenth
is there for ``watchdog prune`` to delete. Whatever columns the store has when the
benchmark runs, the copies carry the values the store itself chose.

Built fast: one ``INSERT ... SELECT`` per ``CHUNK`` rows over ``generate_series`` on
PostgreSQL, the SEQUENCE engine's ``seq_M_to_N`` on MariaDB, a recursive CTE on SQLite;
ids drawn as one block from the job id sequence (no ``nextval`` per row); job ids
zero-padded, so they sort as their numbers and each chunk appends at the end of the job id
indexes; every copied row already positioned in the settled feed, as a deployment that
prunes has them (each prune pass positions what it sees), so the settled rows enter only
the settled partial indexes and a prune finds them released. Then ``VACUUM ANALYZE`` on
PostgreSQL (what autovacuum would do before long, done before the measurements rather than
during them), ``ANALYZE TABLE`` on MariaDB, ``ANALYZE`` on SQLite. Progress (rows so far,
rows/s) goes to stderr after each chunk. Runs inside the watchdog Django settings
(bench.driver).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from django.db import connection, transaction

import django_watchdog as wd
from django_watchdog.models import Job

HISTORY_QUEUES = 1000
#: Rows per INSERT, each its own transaction: large enough that a statement's own cost
#: vanishes, small enough to report progress every few seconds of a long build.
CHUNK = 250_000
#: Digits of a generated job id's number ('hist-0000000001'): they sort as numbers.
ID_DIGITS = 10


START_CLOCK = (
    "INSERT INTO watchdog_feed_clock (id, last_position) VALUES (1, 0) ON CONFLICT (id) DO NOTHING"
)
START_CLOCK_MARIADB = "INSERT IGNORE INTO watchdog_feed_clock (id, last_position) VALUES (1, 0)"
ADVANCE_CLOCK = "UPDATE watchdog_feed_clock SET last_position = last_position + %s WHERE id = 1"
#: MariaDB's generated columns (migration 0009) take no value in an INSERT.
MARIADB_WRITABLE_COLUMNS = (
    "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() "
    "AND table_name = %s AND is_generated = 'NEVER' ORDER BY ordinal_position"
)
#: A block of ``count`` job ids from the id sequence: its first, and the sequence moved past
#: its last, so the enqueues that follow draw ids above the copies.
RESERVE_IDS = {
    "postgresql": (
        "SELECT nextval(pg_get_serial_sequence('watchdog_job', 'id'))",
        "SELECT setval(pg_get_serial_sequence('watchdog_job', 'id'), %s)",
    ),
    "mysql": (
        "SELECT NEXTVAL(watchdog_job_id_seq)",
        "SELECT SETVAL(watchdog_job_id_seq, %s)",
    ),
}


def history_id(number: int) -> str:
    """The job id of the settled history's row ``number`` (1 is the oldest)."""
    return f"hist-{number:0{ID_DIGITS}d}"


def progress(message: str) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}]   {message}\n")
    sys.stderr.flush()


def _columns(table: str) -> list[str]:
    """The columns an INSERT may write, in table order."""
    with connection.cursor() as cursor:
        if connection.vendor == "mysql":
            cursor.execute(MARIADB_WRITABLE_COLUMNS, [table])
            return [row[0] for row in cursor.fetchall()]
        return [c.name for c in connection.introspection.get_table_description(cursor, table)]


def _text(prefix: str, number: str, digits: int = 0) -> str:
    """SQL for the text ``prefix`` followed by the number ``number`` (zero-padded)."""
    if digits:
        cast = "CHAR" if connection.vendor == "mysql" else "TEXT"
        if connection.vendor == "sqlite":  # no LPAD: the digits of a larger number, cut
            number = f"substr('{'0' * digits}' || {number}, -{digits})"
        else:
            number = f"LPAD(CAST({number} AS {cast}), {digits}, '0')"
    if connection.vendor == "mysql":
        return f"CONCAT('{prefix}', {number})"
    return f"'{prefix}' || {number}"


def _earlier(column: str, seconds: str) -> str:
    """SQL for the template's ``column`` moved ``seconds`` back (NULL stays NULL)."""
    if connection.vendor == "postgresql":
        return f"t.{column} - make_interval(secs => {seconds})"
    if connection.vendor == "mysql":
        return f"t.{column} - INTERVAL ({seconds}) SECOND"
    return f"datetime(t.{column}, '-' || ({seconds}) || ' seconds')"


def _reserve_ids(count: int) -> int:
    """The id before a block of ``count`` fresh job ids (copy ``g`` takes ``base + g``)."""
    with connection.cursor() as cursor:
        if connection.vendor in RESERVE_IDS:
            draw, move = RESERVE_IDS[connection.vendor]
            cursor.execute(draw)
            first = int(cursor.fetchone()[0])
            cursor.execute(move, [first + count - 1])
            cursor.fetchall()
            return first - 1
        cursor.execute("SELECT COALESCE(MAX(id), 0) FROM watchdog_job")
        return int(cursor.fetchone()[0])


def _numbered(lo: int, hi: int, base: int) -> tuple[str, str]:
    """A prefix for the INSERT (SQLite's CTE) and a row source ``s`` of g = lo..hi, with
    ``s.id = base + g``."""
    if connection.vendor == "postgresql":
        return "", f"(SELECT g, {base} + g AS id FROM generate_series({lo}, {hi}) AS g) AS s"
    if connection.vendor == "mysql":  # MariaDB's SEQUENCE engine: seq_M_to_N is a table
        return "", f"(SELECT seq AS g, {base} + seq AS id FROM seq_{lo}_to_{hi}) AS s"
    cte = (
        f"WITH RECURSIVE numbers(g) AS (SELECT {lo} UNION ALL "
        f"SELECT g + 1 FROM numbers WHERE g < {hi}) "
    )
    return cte, f"(SELECT g, {base} + g AS id FROM numbers) AS s"


def _clone(
    table: str, key: str, template: Any, count: int, overrides: dict[str, str], what: str
) -> int:
    """Insert ``count`` copies of ``table``'s row ``key = template``, with ``overrides``
    (SQL over ``s.g``, 1..count, and ``s.id``), ``CHUNK`` rows per transaction."""
    quote = connection.ops.quote_name
    columns = _columns(table)
    exprs = ", ".join(overrides.get(c, f"t.{quote(c)}") for c in columns)
    names = ", ".join(quote(c) for c in columns)
    source = f"(SELECT * FROM {table} WHERE {quote(key)} = %s) AS t"
    base = _reserve_ids(count) if "id" in columns else 0
    made, started = 0, time.perf_counter()
    for lo in range(1, count + 1, CHUNK):
        hi = min(count, lo + CHUNK - 1)
        prefix, numbers = _numbered(lo, hi, base)
        rows = f"{numbers} CROSS JOIN {source}"
        sql = f"INSERT INTO {table} ({names}) {prefix}SELECT {exprs} FROM {rows}"
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, [template])
            made += int(cursor.rowcount)
        if count > CHUNK:
            seconds = time.perf_counter() - started
            progress(f"{what}: {made:,} of {count:,} rows ({made / seconds:,.0f} rows/s)")
    return made


def busy(args: dict[str, Any]) -> dict[str, Any]:
    """The long-running job that occupies the busy queue ``args["queue"]`` (a bench-sleep
    worker runs it)."""
    queue = args["queue"]
    wd.enqueue("busy-head", queue=queue, lane="bench-sleep", payload=float(args["hold"]))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if wd.queue_head(queue).state == "running":
            return {"head": "running"}
        time.sleep(0.05)
    raise SystemExit("the busy queue's head never started running")


def _feed_clock() -> int:
    """The feed clock's last position (the row created if no feed read made it yet)."""
    with connection.cursor() as cursor:
        cursor.execute(START_CLOCK_MARIADB if connection.vendor == "mysql" else START_CLOCK)
        cursor.execute("SELECT last_position FROM watchdog_feed_clock WHERE id = 1")
        return int(cursor.fetchone()[0])


def _analyze() -> float:
    """Fresh statistics (and on PostgreSQL a vacuumed table); the seconds it took."""
    started = time.perf_counter()
    with connection.cursor() as cursor:
        for name in ("watchdog_job", "watchdog_queue"):
            if connection.vendor == "postgresql":
                cursor.execute(f"VACUUM (ANALYZE) {name}")
            elif connection.vendor == "mysql":
                cursor.execute(f"ANALYZE TABLE {name}")
                cursor.fetchall()  # ANALYZE TABLE answers with a row per table
            else:
                cursor.execute(f"ANALYZE {name}")
    return time.perf_counter() - started


def _checkpoint() -> float:
    """On PostgreSQL, the build's gigabytes of WAL written out (``CHECKPOINT``); the seconds
    it took. A table that grew over months is not in the middle of such a checkpoint: without
    this, the figures measured first after the build run beside it (its disk writes, and a
    full page image in the WAL for the first change of each page), which the table's size
    does not cause."""
    if connection.vendor != "postgresql":
        return 0.0
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("CHECKPOINT")
    return time.perf_counter() - started


def fill(args: dict[str, Any]) -> dict[str, Any]:
    """``queued`` jobs behind the head of the busy queue ``queue``, ``settled`` settled."""
    busy_queue, queued, settled = args["queue"], int(args["queued"]), int(args["settled"])
    started = time.perf_counter()
    template = Job.objects.filter(state="settled", outcome="completed").order_by("id").first()
    if template is None:
        raise SystemExit("no settled job to copy: run the empty-table drain first")
    wd.enqueue("busy-0", queue=busy_queue, lane="bench", payload="busy-0")
    behind = Job.objects.get(job_id="busy-0")
    made_queues = _clone(
        "watchdog_queue",
        "name",
        busy_queue,
        HISTORY_QUEUES,
        {"name": _text("hist-", "(s.g - 1)")},
        "queues",
    )
    clock = _feed_clock()
    # The history: row g settled (and was enqueued and started) settled + 1 - g seconds
    # before the template, so the oldest rows come first in the feed and in time.
    back = f"({settled} + 1 - s.g)"
    made_settled = _clone(
        "watchdog_job",
        "id",
        template.id,
        settled,
        {
            "id": "s.id",
            "position": "s.id",
            "job_id": _text("hist-", "s.g", ID_DIGITS),
            "queue": _text("hist-", f"(s.g %% {HISTORY_QUEUES})"),
            "feed_position": f"{clock} + s.g",
            "enqueued_at": _earlier("enqueued_at", back),
            "started_at": _earlier("started_at", back),
            "settled_at": _earlier("settled_at", back),
        },
        "settled history",
    )
    made_queued = 1 + _clone(
        "watchdog_job",
        "id",
        behind.id,
        queued - 1,
        {
            "id": "s.id",
            "position": "s.id",
            "job_id": _text("busy-", "s.g", ID_DIGITS),
            "feed_position": f"{clock} + {made_settled} + s.g",
        },
        "queued backlog",
    )
    with connection.cursor() as cursor:
        cursor.execute(ADVANCE_CLOCK, [made_settled + made_queued - 1])
    inserted = time.perf_counter() - started
    rows = made_settled + made_queued
    progress(f"{rows:,} rows in {inserted:.1f}s ({rows / inserted:,.0f} rows/s); analyzing")
    analyzed = _analyze()
    checkpointed = _checkpoint()
    head = wd.queue_head(busy_queue)
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
        "insert_seconds": inserted,
        "analyze_seconds": analyzed,
        "checkpoint_seconds": checkpointed,
        "seconds": time.perf_counter() - started,
    }


def analyze(args: dict[str, Any]) -> dict[str, Any]:
    """What autovacuum would have done: dead rows reclaimed and statistics fresh."""
    return {"seconds": _analyze()}


def run(op: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"flat_busy": busy, "flat_fill": fill, "flat_analyze": analyze}[op](args)
