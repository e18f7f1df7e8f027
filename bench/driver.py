"""One system's client side, run in a subprocess: ``python -m bench.driver SYSTEM DB OP ARGS``.

The orchestrator (bench.py) never imports a system: Django can be configured once per
process, and each system has its own settings. Every op prints one JSON object on stdout.
Ops: setup, reset, enqueue_single, enqueue_counted (bench.cpu_per_enqueue), enqueue_bulk,
prefill, latency, and for watchdog the backlog generator (flat_busy, flat_fill, flat_analyze),
the operator's reads (flat_reads, on bench.admin_settings) and the prune (flat_prune).
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

SYSTEM, DB, OP = sys.argv[1], sys.argv[2], sys.argv[3]
ARGS: dict[str, Any] = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
#: Untimed enqueues before a timed enqueue run, the same for every system: a fresh process
#: connects and fills its caches on its first call, which is no part of an enqueue rate.
WARM_UP = 20


def settle_heap() -> None:
    """Collect garbage before a timed run, for every system: a fresh process's first full
    collection (all of Django's objects) otherwise lands in the timed window (13 of 65 ms
    of watchdog's bulk enqueue), which a long-running web process paid long ago. The
    collector stays on while timing."""
    gc.collect()


def bulk_tags() -> list[str]:
    """The tag of each transaction a bulk op commits: ``times`` of them (the bulk workload),
    or the one tag a prefill's jobs carry."""
    times = ARGS.get("times", 1)
    return [ARGS["tag"]] if times == 1 else [f"{ARGS['tag']}.{time_}" for time_ in range(times)]


def wait_for_stamp(path: str, tag: str, state: dict[str, Any], timeout: float) -> bool:
    """Read the stamp file on from the last offset until a line for ``tag`` appears."""
    needle = f"{tag} ".encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path, "rb") as handle:
                handle.seek(state.get("offset", 0))
                chunk = handle.read()
        except FileNotFoundError:
            chunk = b""
        if chunk:
            complete = chunk[: chunk.rfind(b"\n") + 1]
            state["offset"] = state.get("offset", 0) + len(complete)
            for line in complete.splitlines():
                if line.startswith(needle):
                    return True
        time.sleep(0.0005)
    return False


def latency(enqueue_one: Callable[[str, int], float]) -> dict[str, Any]:
    """Enqueue jobs one at a time to an idle worker; record each commit time."""
    commits: dict[str, float] = {}
    state: dict[str, Any] = {}
    rng = random.Random(5)
    for i in range(ARGS["k"]):
        tag = f"{ARGS['tag']}:{i}"
        commits[tag] = enqueue_one(tag, i)
        if not wait_for_stamp(ARGS["stamp_file"], tag, state, ARGS.get("timeout", 5.0)):
            commits[tag] = -1.0
        time.sleep(rng.uniform(0.0, 0.1))  # a random phase against polling workers
    return {"commits": commits}


# -- Django systems ------------------------------------------------------------------------


#: Ops run with Django's admin installed (bench.admin_settings); the others without it.
ADMIN_OPS = ("flat_reads",)


def django_system(system: str = SYSTEM) -> dict[str, Any]:
    os.environ["DJANGO_SETTINGS_MODULE"] = (
        "bench.admin_settings" if OP in ADMIN_OPS else "bench.settings"
    )
    os.environ["BENCH_SYSTEM"] = system
    os.environ["BENCH_DB"] = DB
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    if OP == "setup":
        call_command("migrate", verbosity=0)
        return {}
    if system == "watchdog":
        import django_watchdog as wd

        def enqueue(tag: str, i: int, queues: int = 0) -> None:
            # ARGS "queue": every job into that queue; "lane": a lane no worker serves
            # keeps the jobs queued (the flatness workload's enqueues).
            queue = ARGS.get("queue") or (f"q{i % queues}" if queues else f"q-{tag}")
            wd.enqueue(tag, queue=queue, lane=ARGS.get("lane", "bench"), payload=tag)

        tables = ["watchdog_job", "watchdog_queue", "watchdog_worker"]
    else:
        from bench.benchapp.tasks import noop

        def enqueue(tag: str, i: int, queues: int = 0) -> None:
            noop.enqueue(tag)

        tables = [t for t in connection.introspection.table_names() if t.startswith("django_tasks")]

    if OP == "reset":
        # TRUNCATE on the servers: after DELETE of the flatness backlog (110,000 rows),
        # InnoDB still walks the deleted rows until its purge catches up (MariaDB's idle
        # feed reads ran 30/s after it, 234/s on fresh tables).
        with connection.cursor() as cursor:
            for table in tables:
                if connection.vendor in ("postgresql", "mysql"):
                    cursor.execute(f"TRUNCATE {table}")
                else:
                    cursor.execute(f"DELETE FROM {table}")
        return {}

    def singles(
        tag: str,
        n: int,
        queues: int = ARGS.get("queues", 0),
        autocommit: bool = ARGS.get("autocommit", False),
    ) -> None:
        # In a view's transaction.atomic(), or alone: autocommit, the call's own.
        own = contextlib.nullcontext if autocommit else transaction.atomic
        for i in range(n):
            with own():
                enqueue(f"{tag}:{i}", i, queues)

    if OP == "enqueue_single":
        return enqueue_single(singles)
    if OP == "enqueue_counted":
        from bench import cpu_per_enqueue

        return cpu_per_enqueue.counted(system, singles, WARM_UP, settle_heap)
    if OP in ("enqueue_bulk", "prefill"):

        def bulk(tag: str, n: int) -> None:
            queues = ARGS.get("queues", 0)
            if system == "watchdog":
                # watchdog's bulk API: one transaction, one INSERT on PostgreSQL. A call
                # takes at most MAX_BULK jobs: more (the prune's feeder, at a fast drain
                # rate) go as several calls in one transaction.
                import django_watchdog as wd
                from django_watchdog.api import MAX_BULK

                def batch(start: int) -> None:
                    wd.enqueue_many(
                        {
                            "job_id": f"{tag}:{i}",
                            "queue": f"q{i % queues}" if queues else f"q-{tag}:{i}",
                            "lane": "bench",
                            "payload": f"{tag}:{i}",
                        }
                        for i in range(start, min(n, start + MAX_BULK))
                    )

                if n <= MAX_BULK:
                    batch(0)
                    return
                with transaction.atomic():
                    for start in range(0, n, MAX_BULK):
                        batch(start)
            else:
                with transaction.atomic():
                    for i in range(n):
                        enqueue(f"{tag}:{i}", i, queues)

        if OP == "enqueue_bulk":
            bulk(f"{ARGS['tag']}w", WARM_UP)
            settle_heap()
        started = time.perf_counter()
        for tag in bulk_tags():
            bulk(tag, ARGS["n"])
        return {"seconds": time.perf_counter() - started, "commit": time.time()}
    if OP == "latency":

        def one(tag: str, i: int) -> float:
            with transaction.atomic():
                enqueue(tag, i)
            return time.time()

        return latency(one)
    if OP == "feed":
        return feed_reads()
    if OP == "flat_reads":
        from bench import reads

        return reads.reads(ARGS)
    if OP == "flat_prune":
        from bench import pruning

        return pruning.prune(ARGS)
    if OP.startswith("flat_"):
        from bench import backlog

        return backlog.run(OP, ARGS)
    raise SystemExit(f"unknown op {OP}")


def enqueue_single(singles: Callable[[str, int], None]) -> dict[str, Any]:
    """``n`` single enqueues after the warm-up, timed; with ARGS "checkpoint", after a
    ``CHECKPOINT`` on PostgreSQL (each measured phase starts with no page yet changed since
    one, whatever ran before); with "counted", also what they cost per enqueue
    (bench.connection_costs)."""
    from django.db import connection

    singles(f"{ARGS['tag']}w", WARM_UP)
    costs = None
    if ARGS.get("counted"):
        from bench.connection_costs import Costs

        costs = Costs()
    if ARGS.get("checkpoint") and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")
    settle_heap()
    before = costs.read() if costs else None
    started = time.perf_counter()
    singles(ARGS["tag"], ARGS["n"])
    done: dict[str, Any] = {"seconds": time.perf_counter() - started}
    if costs and before:
        done["counted"] = costs.per_call(before, costs.read(), ARGS["n"])
    return done


def feed_reads() -> dict[str, Any]:
    """watchdog: settle ``n`` jobs through the public API, then time reading them all from
    the settled feed in pages of ``page``, and ``idle`` reads of a feed with nothing new."""
    import django_watchdog as wd
    from django_watchdog.domain.values import Decision
    from django_watchdog.store.store import Partition, Store

    n, page, idle = ARGS["n"], ARGS["page"], ARGS["idle"]
    wd.enqueue_many({"job_id": f"f:{i}", "queue": f"q{i % 100}", "lane": "bench"} for i in range(n))
    store = Store()
    while (claim := store.claim(Partition(lanes=("bench",)))).status == "claimed":
        assert claim.job is not None and claim.claim_token is not None
        store.settle(claim.job.job_id, claim.claim_token, Decision.completed())
    wd.settled_jobs(None, 1)  # positions them all: the timed reads below only read
    settle_heap()
    started, cursor, read = time.perf_counter(), None, 0
    while records := wd.settled_jobs(cursor, page):
        read, cursor = read + len(records), records[-1].cursor
    paged = time.perf_counter() - started
    assert read == n, f"the feed gave {read} of {n} settled jobs"
    started = time.perf_counter()
    for _ in range(idle):
        assert not wd.settled_jobs(cursor, page)
    return {"page_seconds": paged, "idle_seconds": time.perf_counter() - started}


# -- Procrastinate -------------------------------------------------------------------------


def procrastinate_system() -> dict[str, Any]:
    from bench.peers.procrastinate_app import app, noop

    with app.open():
        if OP == "setup":
            app.schema_manager.apply_schema()
            return {}
        if OP == "reset":
            import psycopg

            from bench.peers.procrastinate_app import DSN

            with psycopg.connect(DSN, autocommit=True) as connection:
                connection.execute("TRUNCATE procrastinate_jobs CASCADE")
            return {}
        if OP == "enqueue_single":
            for i in range(WARM_UP):
                noop.defer(t=f"{ARGS['tag']}w:{i}")
            settle_heap()
            started = time.perf_counter()
            for i in range(ARGS["n"]):
                noop.defer(t=f"{ARGS['tag']}:{i}")
            return {"seconds": time.perf_counter() - started}
        if OP in ("enqueue_bulk", "prefill"):
            if OP == "enqueue_bulk":
                noop.batch_defer(*({"t": f"{ARGS['tag']}w:{i}"} for i in range(WARM_UP)))
                settle_heap()
            started = time.perf_counter()
            for tag in bulk_tags():
                noop.batch_defer(*({"t": f"{tag}:{i}"} for i in range(ARGS["n"])))
            return {"seconds": time.perf_counter() - started, "commit": time.time()}
        if OP == "latency":

            def one(tag: str, i: int) -> float:
                noop.defer(t=tag)
                return time.time()

            return latency(one)
    raise SystemExit(f"unknown op {OP}")


# -- Celery --------------------------------------------------------------------------------


def celery_system() -> dict[str, Any]:
    import redis

    from bench.peers.celery_app import BROKER, QUEUE, noop

    client = redis.Redis.from_url(BROKER)
    if OP in ("setup", "reset"):
        client.flushdb()
        return {}
    if OP == "enqueue_single":
        for i in range(WARM_UP):
            noop.apply_async((f"{ARGS['tag']}w:{i}",), queue=f"{QUEUE}-fill")
        settle_heap()
        started = time.perf_counter()
        for i in range(ARGS["n"]):
            noop.apply_async((f"{ARGS['tag']}:{i}",), queue=f"{QUEUE}-fill")
        seconds = time.perf_counter() - started
        client.delete(f"{QUEUE}-fill")
        return {"seconds": seconds}
    if OP == "prefill":
        # Publish to a queue nobody consumes, then RENAME it onto the consumed queue: the
        # whole backlog appears at once, as a committed transaction does for the others.
        client.delete(f"{QUEUE}-fill")
        started = time.perf_counter()
        for i in range(ARGS["n"]):
            noop.apply_async((f"{ARGS['tag']}:{i}",), queue=f"{QUEUE}-fill")
        seconds = time.perf_counter() - started
        client.rename(f"{QUEUE}-fill", QUEUE)
        return {"seconds": seconds, "commit": time.time()}
    if OP == "latency":

        def one(tag: str, i: int) -> float:
            noop.apply_async((tag,), queue=QUEUE)
            return time.time()

        return latency(one)
    raise SystemExit(f"unknown op {OP}")


# -- Floor ---------------------------------------------------------------------------------


def floor_system() -> dict[str, Any]:
    from bench import floor

    target = ARGS["target"]
    if DB == "mariadb":
        return floor_mariadb(floor.connect_mariadb(target))
    if DB == "postgres":
        import psycopg

        connection: Any = psycopg.connect(target, autocommit=True)
        create, param = floor.CREATE_POSTGRES, "%s"
    else:
        connection = floor.connect_sqlite(target)
        create, param = floor.CREATE_SQLITE, "?"
    if OP == "setup":
        if DB == "postgres":
            connection.execute(create)
        else:
            connection.executescript(create)
        return {}
    if OP == "reset":
        connection.execute(f"DELETE FROM {floor.TABLE}")
        return {}
    if OP == "prefill":
        started = time.perf_counter()
        rows = [(f"{ARGS['tag']}:{i}",) for i in range(ARGS["n"])]
        if DB == "postgres":
            with connection.transaction(), connection.cursor() as cursor:
                cursor.executemany(f"INSERT INTO {floor.TABLE} (tag) VALUES ({param})", rows)
        else:
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany(f"INSERT INTO {floor.TABLE} (tag) VALUES ({param})", rows)
            connection.execute("COMMIT")
        return {"seconds": time.perf_counter() - started, "commit": time.time()}
    raise SystemExit(f"unknown op {OP}")


def floor_jobs_system() -> dict[str, Any]:
    """The floor on watchdog's job table (PostgreSQL): its database migrated as watchdog's
    (the orchestrator's environment names it), its rows ``bench.floor.JOB_ROWS``."""
    from bench import floor

    if OP == "setup":
        os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        return {}
    import psycopg

    with psycopg.connect(ARGS["target"], autocommit=True) as connection:
        if OP == "reset":
            connection.execute(f"TRUNCATE {floor.JOB_TABLE}")
            return {}
        if OP == "prefill":
            started = time.perf_counter()
            connection.execute(floor.JOB_ROWS, {"prefix": f"{ARGS['tag']}:", "count": ARGS["n"]})
            return {"seconds": time.perf_counter() - started, "commit": time.time()}
    raise SystemExit(f"unknown op {OP}")


def floor_worker_system() -> dict[str, Any]:
    """The default worker's statements in a bare loop (PostgreSQL): its jobs watchdog's,
    set up, reset and enqueued as watchdog's own are."""
    return django_system("watchdog")


def floor_mariadb(connection: Any) -> dict[str, Any]:
    """The floor's ops on MariaDB (a MySQLdb connection, one transaction per op)."""
    from bench import floor

    with connection.cursor() as cursor:
        if OP == "setup":
            for statement in floor.CREATE_MARIADB:
                cursor.execute(statement)
            return {}
        if OP == "reset":
            cursor.execute(f"DELETE FROM {floor.TABLE}")
            connection.commit()
            return {}
        if OP == "prefill":
            started = time.perf_counter()
            rows = [(f"{ARGS['tag']}:{i}",) for i in range(ARGS["n"])]
            cursor.executemany(f"INSERT INTO {floor.TABLE} (tag) VALUES (%s)", rows)
            connection.commit()
            return {"seconds": time.perf_counter() - started, "commit": time.time()}
    raise SystemExit(f"unknown op {OP}")


def main() -> None:
    systems = {
        "watchdog": django_system,
        "tasks_db": django_system,
        "procrastinate": procrastinate_system,
        "celery": celery_system,
        "floor": floor_system,
        "floor_jobs": floor_jobs_system,
        "floor_chained": floor_system,
        "floor_jobs_chained": floor_jobs_system,
        "floor_worker": floor_worker_system,
    }
    result = systems[SYSTEM]()
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
