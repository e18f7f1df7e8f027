"""Where a job's milliseconds go, counted rather than timed: statements, driver round trips and
commits per ``enqueue()`` and per job of the default worker, and the worker's CPU per job.

Counts do not depend on the machine's load, so they can be compared across commits on a
busy machine where wall-clock rates cannot. Run it against a scratch database (dropped and
re-created; ``watchdog_roundtrips`` with ``WATCHDOG_TEST_DB_SUFFIX`` appended, so runs
beside each other stay apart): ``python -m bench.roundtrips postgres|sqlite [--jobs N]``.
It prints a Markdown table.

What is counted, per thread of the worker process (its main loop, its job thread, the
heartbeat, the waker):

- *statements*: every statement sent through a driver cursor (watchdog's named statements
  and the ORM's alike), named by the dialect constant it is, when it is one;
- *round trips*: statements plus the transaction commands the driver sends on its own
  (``BEGIN``, ``COMMIT``, ``ROLLBACK``, savepoints), each one exchange with the server;
  statements sent together (psycopg's pipeline mode) are one exchange;
- *commits*: the ``COMMIT`` among them, and each pipeline sent in autocommit (one implicit
  transaction the server commits on its own): each one a WAL flush on PostgreSQL.
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.connection_costs import cpu_seconds

#: Jobs drained by the worker (over JOBS / 10 queues).
JOBS = 500
DB_NAME = "watchdog_roundtrips"
NEW_QUEUE = "enqueue(), new queue, own transaction"
EXISTING_QUEUE = "enqueue(), existing queue with queued jobs"


def enqueued_id(label: str, index: int) -> str:
    return f"{'new' if label == NEW_QUEUE else 'existing'}:{index}"


class Tally:
    """Counts per (thread, kind, name); thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: collections.Counter[tuple[str, str, str]] = collections.Counter()

    def add(self, kind: str, name: str) -> None:
        thread = threading.current_thread().name
        if thread.startswith("watchdog-job"):
            thread = "watchdog-job"
        with self.lock:
            self.counts[(thread, kind, name)] += 1

    def clear(self) -> None:
        with self.lock:
            self.counts.clear()

    def total(self, kind: str, thread: str | None = None) -> int:
        return sum(n for (t, k, _), n in self.counts.items() if k == kind and thread in (None, t))


def statement_names() -> dict[str, str]:
    """Statement text -> the name of the dialect constant that holds it."""
    from django_watchdog.store.dialects import (
        common,
        postgres,
        postgres_claims,
        postgres_enqueue,
        postgres_upkeep,
        sqlite,
    )

    names: dict[str, str] = {}
    for module in (common, postgres, postgres_claims, postgres_enqueue, postgres_upkeep, sqlite):
        for name, value in vars(module).items():
            if isinstance(value, str) and name.isupper() and len(value) > 20:
                names.setdefault(" ".join(value.split()), name)
    return names


def name_of(sql: Any, names: dict[str, str]) -> str:
    text = " ".join(str(sql).split())
    if text in names:
        return names[text]
    if "UPDATE watchdog_job AS taken" in text:
        return "claim"
    if 'UPDATE "django_watchdog_worker"' in text or "watchdog_worker" in text[:80]:
        return "worker registry (ORM)"
    return text[:60]


@contextmanager
def counting_postgres(tally: Tally, names: dict[str, str]) -> Iterator[None]:
    """Count every statement and transaction command psycopg sends, in every thread.

    Statements sent together in pipeline mode are one round trip (``pipeline``), and in
    autocommit one implicit transaction, which the server commits at its Sync: counted as
    a commit (``COMMIT`` of the ``pipeline`` kind). So are the store's exchanges on libpq's
    pipeline (``Exchange``), which no psycopg cursor sees; the ``BEGIN`` an exchange sends
    first inside ``atomic()`` is part of its one round trip."""
    import psycopg
    from psycopg._connection_base import BaseConnection

    from django_watchdog.store.dialects.postgres_exchange import Exchange

    execute, command = psycopg.Cursor.execute, BaseConnection._exec_command
    pipeline = psycopg.Connection.pipeline
    exchange = Exchange._run

    def counted_exchange(self: Any, statements: Any, begin: Any) -> Any:
        for sql, _ in statements:
            tally.add("statement", name_of(sql, names))
            tally.add("pipelined", name_of(sql, names))
        tally.add("pipeline", "COMMIT" if self.raw.autocommit else "Sync")
        return exchange(self, statements, begin)

    def counted_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        tally.add("statement", name_of(query, names))
        if self.connection._pipeline is not None:
            tally.add("pipelined", name_of(query, names))
        return execute(self, query, *args, **kwargs)

    @contextmanager
    def counted_pipeline(self: Any) -> Iterator[Any]:
        tally.add("pipeline", "COMMIT" if self.autocommit else "Sync")
        with pipeline(self) as sent:
            yield sent

    def counted_command(self: Any, text: Any, *args: Any, **kwargs: Any) -> Any:
        word = bytes(text).split()[0].decode().upper() if text else "?"
        tally.add("command", word)
        return command(self, text, *args, **kwargs)

    psycopg.Cursor.execute = counted_execute  # type: ignore[method-assign]
    BaseConnection._exec_command = counted_command  # type: ignore[method-assign]
    psycopg.Connection.pipeline = counted_pipeline  # type: ignore[method-assign,assignment]
    Exchange._run = counted_exchange  # type: ignore[method-assign]
    try:
        yield
    finally:
        psycopg.Cursor.execute = execute  # type: ignore[method-assign]
        BaseConnection._exec_command = command  # type: ignore[method-assign]
        psycopg.Connection.pipeline = pipeline  # type: ignore[method-assign]
        Exchange._run = exchange  # type: ignore[method-assign]


@contextmanager
def counting_sqlite(tally: Tally, names: dict[str, str]) -> Iterator[None]:
    """Count statements through Django's execute_wrapper hooks on every connection."""
    from django.db import connections
    from django.db.backends.signals import connection_created

    def record(run: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        word = sql.split()[0].upper() if sql.strip() else "?"
        if word in ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE"):
            tally.add("command", word)
        else:
            tally.add("statement", name_of(sql, names))
        return run(sql, params, many, context)

    def hook(sender: Any, connection: Any, **kwargs: Any) -> None:
        connection.execute_wrappers.append(record)

    connection_created.connect(hook)
    for alias in connections:
        connections[alias].execute_wrappers.append(record)
    # SQLite's COMMIT is a call of the driver, not a statement: count it where Django makes it.
    from django.db.backends.sqlite3.base import DatabaseWrapper

    commit = DatabaseWrapper._commit

    def counted_commit(self: Any) -> Any:
        tally.add("command", "COMMIT")
        return commit(self)

    DatabaseWrapper._commit = counted_commit  # type: ignore[method-assign]
    try:
        yield
    finally:
        connection_created.disconnect(hook)
        DatabaseWrapper._commit = commit  # type: ignore[method-assign]


def setup(db: str, name: str = DB_NAME) -> None:
    """Django on a fresh scratch database ``name`` (dropped and re-created), migrated."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    os.environ["BENCH_SYSTEM"] = "watchdog"
    os.environ["BENCH_DB"] = db
    os.environ["BENCH_DB_NAME"] = name
    os.environ.setdefault("BENCH_STAMP_FILE", os.devnull)
    if db == "postgres":
        import psycopg

        with psycopg.connect(host="127.0.0.1", user="postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"CREATE DATABASE {name}")
    elif db == "mariadb":
        from bench.settings import DATABASES

        _recreate_mariadb(DATABASES["default"], name)
    else:
        from bench.settings import SQLITE_DIR

        os.makedirs(SQLITE_DIR, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            path = os.path.join(SQLITE_DIR, f"{name}.sqlite3{suffix}")
            if os.path.exists(path):
                os.remove(path)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _recreate_mariadb(database: dict[str, Any], name: str) -> None:
    """Drop and create database ``name`` as the bench's MariaDB user (scripts/ensure-mariadb
    lets it create ``watchdog*`` databases)."""
    import MySQLdb

    admin = MySQLdb.connect(
        host=database["HOST"],
        port=int(database["PORT"]),
        user=database["USER"],
        password=database["PASSWORD"],
    )
    try:
        cursor = admin.cursor()
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    finally:
        admin.close()


def measure(db: str, jobs: int, idle: float) -> list[str]:
    from django.core.management import call_command
    from django.db import transaction

    import django_watchdog as wd

    tally, names = Tally(), statement_names()
    counting = counting_postgres if db == "postgres" else counting_sqlite
    lines = [
        f"## {db}: per operation (counted, {jobs} jobs over {jobs // 10} queues)",
        "",
        "| operation | thread | statements | round trips | commits | statements by name |",
        "|---|---|---:|---:|---:|---|",
    ]

    def row(label: str, per: int, thread: str | None = None) -> None:
        statements = tally.total("statement", thread)
        exchanges = (
            statements
            - tally.total("pipelined", thread)
            + tally.total("pipeline", thread)
            + tally.total("command", thread)
        )
        commits = sum(
            n
            for (t, k, name), n in tally.counts.items()
            if k in ("command", "pipeline") and name == "COMMIT" and thread in (None, t)
        )
        by_name = collections.Counter()
        for (t, k, name), n in tally.counts.items():
            if k == "statement" and thread in (None, t):
                by_name[name] += n
        named = ", ".join(f"{name} {n / per:.2f}" for name, n in by_name.most_common())
        lines.append(
            f"| {label} | {thread or 'all'} | {statements / per:.2f} | "
            f"{exchanges / per:.2f} | {commits / per:.2f} | {named} |"
        )

    with counting(tally, names):
        # Enqueued into a lane the worker does not serve: they stay queued.
        wd.enqueue("warm", queue="warm", lane="enqueued")  # connect, fill caches
        for label, queue_of in (
            (NEW_QUEUE, lambda i: f"new{i}"),
            (EXISTING_QUEUE, lambda i: "warm"),
        ):
            tally.clear()
            for i in range(50):
                with transaction.atomic():
                    wd.enqueue(enqueued_id(label, i), queue=queue_of(i), lane="enqueued")
            row(label, 50)
        indexes = (
            index_entries(
                {
                    "into a new queue (its head, ready)": enqueued_id(NEW_QUEUE, 0),
                    "behind queued jobs (not ready)": enqueued_id(EXISTING_QUEUE, 0),
                }
            )
            if db == "postgres"
            else []
        )
        wd.enqueue_many(
            {"job_id": f"j{i}", "queue": f"q{i % (jobs // 10)}", "lane": "bench"}
            for i in range(jobs)
        )
        tally.clear()
        before, started = cpu_seconds(), time.perf_counter()
        call_command("watchdog_worker", "--lane", "bench", "--burst", verbosity=0)
        cpu, wall = cpu_seconds() - before, time.perf_counter() - started
        for thread in sorted({t for (t, _, _) in tally.counts}):
            row("drain, default worker (per job)", jobs, thread)
        row("drain, default worker (per job)", jobs)
        if idle:
            idle_worker(idle, tally)
            for thread in sorted({t for (t, _, _) in tally.counts}):
                row(f"idle worker (per second, over {idle:.0f} s)", round(idle), thread)
    lines += indexes
    lines += [
        "",
        f"worker CPU (user+system, all threads): {cpu / jobs * 1000:.2f} ms per job; "
        f"wall {wall / jobs * 1000:.2f} ms per job (load-dependent)",
    ]
    return lines


#: Each index of the job table with its partial predicate (``TRUE`` for a full index).
INDEX_PREDICATES = """
SELECT c.relname, coalesce(pg_get_expr(i.indpred, i.indrelid), 'TRUE')
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = 'watchdog_job'::regclass ORDER BY c.relname
"""


def index_entries(job_ids: dict[str, str]) -> list[str]:
    """PostgreSQL: the indexes each job (label -> job_id) has an entry in, which is the index
    maintenance its insert paid (a partial index whose predicate the row fails costs nothing)."""
    from django.db import connection

    lines = [
        "",
        "| enqueued job | index entries | of | indexes it entered |",
        "|---|---:|---:|---|",
    ]
    with connection.cursor() as cursor:
        cursor.execute(INDEX_PREDICATES)
        indexes = cursor.fetchall()
        for label, job_id in job_ids.items():
            entered = []
            for name, predicate in indexes:
                cursor.execute(
                    f"SELECT 1 FROM watchdog_job WHERE job_id = %s AND ({predicate})",  # noqa: S608
                    [job_id],
                )
                if cursor.fetchone():
                    entered.append(name.removeprefix("watchdog_job_"))
            lines.append(f"| {label} | {len(entered)} | {len(indexes)} | {', '.join(entered)} |")
    return lines


def idle_worker(seconds: float, tally: Tally) -> None:
    """Run a worker with no work, count ``seconds`` of it from 2 s after it started, then
    stop it with SIGTERM."""
    from django.core.management import call_command

    def count_then_stop() -> None:
        time.sleep(2.0)  # start-up work (registration, a first recovery pass) is not idling
        tally.clear()
        time.sleep(seconds)
        os.kill(os.getpid(), signal.SIGTERM)

    def start_counting() -> None:
        threading.Thread(target=count_then_stop, daemon=True).start()

    from django_watchdog.engine import events

    started = False
    log = events.log

    def watching(level: int, event: str, **fields: Any) -> None:
        nonlocal started
        if event == "worker_started" and not started:
            started = True
            start_counting()
        log(level, event, **fields)

    events.log = watching  # type: ignore[assignment]
    try:
        call_command("watchdog_worker", "--lane", "bench", verbosity=0)
    finally:
        events.log = log  # type: ignore[assignment]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", choices=("postgres", "sqlite"))
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument(
        "--idle", type=float, default=10.0, help="seconds an idle worker is counted (0: skip)"
    )
    options = parser.parse_args()
    setup(options.db, DB_NAME + os.environ.get("WATCHDOG_TEST_DB_SUFFIX", ""))
    print("\n".join(measure(options.db, options.jobs, options.idle)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
