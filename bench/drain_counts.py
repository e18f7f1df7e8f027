"""What a job of the default worker costs on an existing PostgreSQL database, counted.

``bench.cpu_per_job`` measures on a scratch database it re-creates; this measures on one
that is there already, such as the at-scale tables (``bench/run --at-scale`` builds them in
``watchdog_bench`` plus ``BENCH_DB_SUFFIX``), so the same counts can be read on empty and
on big tables. It starts ``--workers`` default workers (``bench.cpu_per_job.Worker``), and
``--repeat`` times enqueues ``--jobs`` no-op jobs over jobs / 10 queues in one transaction
(``--vacuum``: after a ``VACUUM (ANALYZE)`` of the job and queue tables, as the flatness
workload runs each drain) and waits until they settled. Per job it prints:

- the workers' CPU and their server backends' (``/proc``), and the wall time (load-dependent);
- WAL bytes, records and full-page images (``pg_stat_wal``: the whole server's, so run it on
  a server of its own), and blocks read from outside the server's buffers against blocks
  found in them (``pg_stat_database``);
- with ``pg_stat_statements`` loaded (``shared_preload_libraries``), per statement of the
  drain: calls, time, blocks hit, read and dirtied, WAL records and full-page images;
- with ``--waits``, what the backends serving the workers' jobs were doing while they
  drained: ``pg_stat_activity`` read back to back, each backend's samples by its wait
  event (``CPU``: running, no wait event; ``idle``: waiting for its client), for each
  backend busy at least half its samples (a job thread's; a worker's other connections
  are idle). The reads cost the server and this process CPU: read the shares, not the
  rates, of a drain measured so.

``--bare`` starts the default worker's statements in a bare loop instead of workers
(``bench.floor --worker-statements``): the same measures, with nothing of the worker's
Python around its statements.

``python -m bench.drain_counts DATABASE [--jobs N] [--repeat N] [--workers N] [--vacuum]
[--bare] [--waits]``; ``PGPORT`` picks the server (as bench/settings.py reads it).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import time
from typing import Any

from bench.cpu_per_job import Worker, server_cpu

#: Counters the server keeps for its backends are sent at most once a second while idle.
STATS_DELAY = 1.1
WAL = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0'), wal_records, wal_fpi FROM pg_stat_wal"
BLOCKS = "SELECT blks_read, blks_hit FROM pg_stat_database WHERE datname = current_database()"
SETTLED = (
    "SELECT count(*) FROM watchdog_job WHERE job_id >= %s AND job_id < %s AND state = 'settled'"
)
COUNTERS = ("wal_bytes", "wal_records", "fpi", "blks_read", "blks_hit")
HAS_STATEMENTS = "SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'"
RESET_STATEMENTS = "SELECT pg_stat_statements_reset()"
STATEMENTS = """
SELECT calls, total_exec_time, shared_blks_hit, shared_blks_read, shared_blks_dirtied,
       wal_records, wal_fpi, left(regexp_replace(query, '\\s+', ' ', 'g'), 60)
  FROM pg_stat_statements
 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND calls >= %s
 ORDER BY total_exec_time DESC LIMIT 6
"""

#: Each client backend of the database but this one: what it is doing now.
WAITS = """
SELECT pid, CASE WHEN state = 'active' THEN coalesce(wait_event_type || ':' || wait_event, 'CPU')
                 ELSE state END
  FROM pg_stat_activity
 WHERE datname = current_database() AND pid <> pg_backend_pid()
   AND backend_type = 'client backend'
"""
#: A backend serving jobs is busy at least this share of its samples.
BUSY = 0.5


def fetch(sql: str, *params: Any) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description else []


def counters() -> list[float]:
    """WAL bytes, WAL records, full-page images, blocks read, blocks hit: so far."""
    return [float(value) for value in (*fetch(WAL)[0], *fetch(BLOCKS)[0])]


class Waits:
    """Samples of ``WAITS``, by backend and by what it was doing."""

    def __init__(self) -> None:
        self.seen: dict[int, collections.Counter[str]] = collections.defaultdict(
            collections.Counter
        )

    def sample_for(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for pid, doing in fetch(WAITS):
                self.seen[pid][doing] += 1

    def report(self) -> list[str]:
        """A line per busy backend: its samples' shares, the largest first."""
        lines = []
        for pid, doing in self.seen.items():
            total = sum(doing.values())
            if doing["idle"] > (1 - BUSY) * total:
                continue
            shares = ", ".join(f"{what} {n / total:.0%}" for what, n in doing.most_common(5))
            lines.append(f"  backend {pid} ({total} samples): {shares}")
        return lines


def drain(workers: list[Worker], prefix: str, jobs: int, waits: Waits | None = None) -> float:
    """Enqueue ``jobs`` over jobs / 10 queues and wait until they settled (sampling
    ``waits`` meanwhile); wall seconds."""
    import django_watchdog as wd

    queues = max(1, jobs // 10)
    started = time.perf_counter()
    wd.enqueue_many(
        {"job_id": f"{prefix}{n:07d}", "queue": f"{prefix}q{n % queues}", "lane": "bench"}
        for n in range(jobs)
    )
    while fetch(SETTLED, prefix, prefix + "~")[0][0] < jobs:
        for worker in workers:
            if worker.process.poll() is not None:
                raise RuntimeError(f"a worker exited with {worker.process.returncode}")
        if waits is None:
            time.sleep(0.05)
        else:
            waits.sample_for(0.05)
    return time.perf_counter() - started


def measure(options: argparse.Namespace) -> None:
    workers = [
        Worker("postgres", options.database, bare=options.bare) for _ in range(options.workers)
    ]
    statements = bool(fetch(HAS_STATEMENTS))
    runs: list[dict[str, float]] = []
    try:
        drain(workers, f"{options.tag}w-", 200)  # the workers are up
        for rep in range(options.repeat):
            if options.vacuum:
                started = time.perf_counter()
                fetch("VACUUM (ANALYZE) watchdog_job")
                fetch("VACUUM (ANALYZE) watchdog_queue")
                print(f"vacuum: {time.perf_counter() - started:.2f} s")
            if statements:
                fetch(RESET_STATEMENTS)
            time.sleep(STATS_DELAY)
            before, served = counters(), server_cpu("postgres")
            cpu = sum(sum(w.cpu()) for w in workers)
            waits = Waits() if options.waits else None
            wall = drain(workers, f"{options.tag}{rep}-", options.jobs, waits)
            cpu = sum(sum(w.cpu()) for w in workers) - cpu
            served = server_cpu("postgres") - served
            time.sleep(STATS_DELAY)
            after = counters()
            per_job = [(a - b) / options.jobs for a, b in zip(after, before, strict=True)]
            run = {
                "worker_cpu_ms": cpu / options.jobs * 1e3,
                "server_cpu_ms": served / options.jobs * 1e3,
                "wall_ms": wall / options.jobs * 1e3,
                **dict(zip(COUNTERS, per_job, strict=True)),
            }
            runs.append(run)
            print(json.dumps({name: round(value, 3) for name, value in run.items()}))
            if waits is not None:
                print("\n".join(waits.report()))
            if statements:
                for calls, ms, hit, read, dirtied, records, fpi, text in fetch(
                    STATEMENTS, options.jobs // 2
                ):
                    print(
                        f"  {calls} calls, per call: {ms / calls:.3f} ms, {hit / calls:.1f} hit, "
                        f"{read / calls:.2f} read, {dirtied / calls:.2f} dirtied, "
                        f"{records / calls:.1f} WAL records, {fpi / calls:.2f} FPI | {text}"
                    )
    finally:
        for worker in workers:
            worker.stop()
    medians = {name: round(statistics.median(r[name] for r in runs), 3) for name in runs[0]}
    print("median", json.dumps(medians), "load average", os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("database")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--vacuum", action="store_true", help="VACUUM (ANALYZE) before each")
    parser.add_argument("--tag", default=f"dc{os.getpid()}-", help="job id prefix")
    parser.add_argument("--bare", action="store_true", help="the worker's statements, bare")
    parser.add_argument("--waits", action="store_true", help="sample the backends' waits")
    options = parser.parse_args()
    os.environ.update(
        DJANGO_SETTINGS_MODULE="bench.settings",
        BENCH_SYSTEM="watchdog",
        BENCH_DB="postgres",
        BENCH_DB_NAME=options.database,
        BENCH_STAMP_FILE=os.devnull,
    )
    import django

    django.setup()
    measure(options)


if __name__ == "__main__":
    main()
