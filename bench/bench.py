"""Run watchdog, its peers and the floor through the same workloads; print tables, save JSON.

Usage (through bench/run, which builds the virtualenv):
    bench/run [--quick] [--repeat N] [--db sqlite|postgres|mariadb|both|all] [--jobs N]
              [--only watchdog,tasks_db,procrastinate,celery,floor,floor_jobs,floor_chained,
                      floor_jobs_chained,floor_worker] [--no-charts]

Every system runs real worker processes started exactly as a user would start them; every
job is the same no-op that appends one line to a stamp file (bench/stamp.py). Rates come
from the stamps: a drain is N / (last handler start - commit of the backlog); a wake
latency is handler start - commit of that one job. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from bench import flat_enqueues, flatness

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
RESULTS = ROOT / "bench" / "results"
CHARTS = ROOT / "docs" / "performance"
#: Stamps, logs and SQLite files (BENCH_WORK_DIR: a bench test runs beside a bench).
WORK = Path(os.environ.get("BENCH_WORK_DIR", "/tmp/django-watchdog-bench"))
SQLITE_DIR = WORK
#: Appended to every server database's name (bench/settings.py reads it too).
DB_SUFFIX = os.environ.get("BENCH_DB_SUFFIX", "")
#: PostgreSQL: ``PGHOST`` and ``PGPORT`` (libpq's own variables, which bench/settings.py and
#: the peers read too) move every system to another server, e.g. a cluster configured apart.
PG = {
    "host": os.environ.get("PGHOST", "127.0.0.1"),
    "port": int(os.environ.get("PGPORT", "5432")),
    "user": "postgres",
}
#: MariaDB: the systems connect over TCP as this user; root over the server's socket
#: (as scripts/ensure-mariadb) creates it and its databases.
MARIADB = {
    "host": os.environ.get("MARIADB_HOST", "127.0.0.1"),
    "port": int(os.environ.get("MARIADB_PORT", "3306")),
    "user": "bench",  # bench/settings.py: the same user, host and port
    "password": "bench",
}
MARIADB_SOCKETS = ("/run/mysqld/mysqld.sock", "/var/run/mysqld/mysqld.sock", "/tmp/mysql.sock")
SYSTEMS = (
    "watchdog",
    "tasks_db",
    "procrastinate",
    "celery",
    "floor",
    "floor_jobs",
    "floor_chained",
    "floor_jobs_chained",
    "floor_worker",
)
#: The floor's loop (``bench.floor``): on its own table, and (PostgreSQL) on watchdog's job
#: table, which pays what the schema costs without what the worker adds; and (PostgreSQL,
#: ``--chained``) both in the default worker's shape: one statement a job settles the last
#: and claims the next, one commit a job.
#: ``floor_worker`` (PostgreSQL): the default worker's own statements in a bare loop
#: (``--worker-statements``), on jobs watchdog enqueued into serial queues.
FLOORS = ("floor", "floor_jobs", "floor_chained", "floor_jobs_chained", "floor_worker")
#: The floors whose database is migrated as watchdog's (they run on its job table).
JOB_TABLE_FLOORS = ("floor_jobs", "floor_jobs_chained", "floor_worker")
DATABASES = ("sqlite", "postgres", "mariadb")
#: --db's names for several databases ("both" kept its meaning when MariaDB came).
DB_CHOICES = {"both": ["sqlite", "postgres"], "all": list(DATABASES)}
PEERS = ("tasks_db", "procrastinate", "celery")
LABELS = {
    "watchdog": "watchdog",
    "tasks_db": "django-tasks-db",
    "procrastinate": "procrastinate",
    "celery": "celery+redis",
    "floor": "floor",
    "floor_jobs": "floor on watchdog's table",
    "floor_chained": "chained floor",
    "floor_jobs_chained": "chained floor on watchdog's table",
    "floor_worker": "the worker's statements, bare",
}
#: The systems measured on each database. Procrastinate is PostgreSQL only; Celery does not
#: use the SQL database: measured once, with the last database given, and shown in the
#: SQLite and PostgreSQL tables; the MariaDB table shows both as n/a (the comparison there
#: is with django-tasks-db and the floor on the same server).
APPLIES = {
    "sqlite": ("watchdog", "tasks_db", "celery", "floor"),
    "postgres": SYSTEMS,
    "mariadb": ("watchdog", "tasks_db", "floor"),
}
#: Systems a database's table shows as a column of n/a, to say they do not apply there.
SHOWN_AS_NA = {"mariadb": ("procrastinate", "celery")}
PG_DATABASES = {
    "watchdog": "watchdog_bench" + DB_SUFFIX,
    "tasks_db": "bench_tasks_db" + DB_SUFFIX,
    "procrastinate": "bench_procrastinate" + DB_SUFFIX,
    "floor": "bench_floor" + DB_SUFFIX,
    "floor_jobs": "bench_floor_jobs" + DB_SUFFIX,
    "floor_chained": "bench_floor_chained" + DB_SUFFIX,
    "floor_jobs_chained": "bench_floor_jobs_chained" + DB_SUFFIX,
    "floor_worker": "bench_floor_worker" + DB_SUFFIX,
}
MARIADB_DATABASES = {
    "watchdog": "bench_watchdog" + DB_SUFFIX,
    "tasks_db": "bench_tasks_db" + DB_SUFFIX,
    "floor": "bench_floor" + DB_SUFFIX,
}
WORKER_PROCS = (1, 2, 4)
WORKLOADS = ("enqueue", "drain", "latency", "flatness", "feed")
FLOOR_PROCS = (1, 2)


@dataclass(frozen=True)
class Sizes:
    enqueue_single: int
    enqueue_bulk: int
    drain: int
    drain_queues: int
    latency: int
    flat_queued: int
    flat_settled: int
    flat_drain: int
    flat_queues: int
    feed: int


DEFAULT = Sizes(500, 2000, 1000, 100, 100, 99_000, 1_000_000, 1000, 100, 2000)
QUICK = Sizes(100, 300, 200, 20, 20, 9_900, 100_000, 200, 20, 300)
#: ``--smoke``: every workload once with tiny sizes, drains with 2 processes of 1 thread
#: only (tests/bench): proves the paths run; its figures mean nothing.
SMOKE = Sizes(10, 20, 20, 4, 5, 100, 1_000, 20, 4, 20)
SMOKE_PROCS = (2,)
#: ``--at-scale``: the flatness workload with 1,000,000 queued jobs (990,000 behind one busy
#: queue, 10,000 drained over 1,000 queues) and 10,000,000 settled rows, built with bulk SQL.
AT_SCALE = {
    "flat_queued": 990_000,
    "flat_settled": 10_000_000,
    "flat_drain": 10_000,
    "flat_queues": 1_000,
}
#: The bulk workload times this many transactions of ``enqueue_bulk`` jobs each, one after
#: the other in one process, and takes their mean rate as the repetition's figure: one
#: transaction of 2,000 jobs takes a tenth to a third of a second here, and timed alone it
#: moved by a third and more between runs (21,815 and 35,166 jobs/s for the same code).
BULK_TRANSACTIONS = 5
#: The settled feed workload: page size (a consumer's batch) and reads of an idle feed.
FEED_PAGE = 100
FEED_IDLE_READS = 500


def log(message: str) -> None:
    sys.stderr.write(f"[{time.strftime('%H:%M:%S')}] {message}\n")
    sys.stderr.flush()


# -- processes -----------------------------------------------------------------------------


def base_env(system: str, db: str, stamp_file: Path) -> dict[str, str]:
    env = os.environ.copy()
    env.update(
        PYTHONPATH=str(ROOT),
        PYTHONUNBUFFERED="1",
        BENCH_SYSTEM=system,
        BENCH_DB=db,
        BENCH_SQLITE_DIR=str(SQLITE_DIR),
        BENCH_STAMP_FILE=str(stamp_file),
    )
    env.pop("DJANGO_SETTINGS_MODULE", None)
    if db == "mariadb":  # bench/settings.py connects as the user prepare() created
        env.update(MARIADB_USER=MARIADB["user"], MARIADB_PASSWORD=MARIADB["password"])
    if system in ("watchdog", "tasks_db"):
        env["DJANGO_SETTINGS_MODULE"] = "bench.settings"
    if system in JOB_TABLE_FLOORS:  # its database is migrated as watchdog's
        env.update(BENCH_SYSTEM="watchdog", BENCH_DB_NAME=PG_DATABASES[system])
    return env


def floor_target(db: str, system: str = "floor") -> str:
    if db == "postgres":
        return f"postgresql://{PG['user']}@{PG['host']}:{PG['port']}/{PG_DATABASES[system]}"
    if db == "mariadb":
        m = MARIADB
        return (
            f"mariadb://{m['user']}:{m['password']}@{m['host']}:{m['port']}/"
            f"{MARIADB_DATABASES['floor']}"
        )
    return str(SQLITE_DIR / "bench_floor.sqlite3")


def mariadb_admin() -> Any:
    """A connection as root over the server's socket (what scripts/ensure-mariadb uses)."""
    import MySQLdb

    socket = next((s for s in MARIADB_SOCKETS if Path(s).exists()), MARIADB_SOCKETS[0])
    return MySQLdb.connect(unix_socket=socket, user="root", charset="utf8mb4")


def create_mariadb_database(name: str) -> None:
    """Drop and create ``name`` (utf8mb4), and let the bench user use it."""
    user, password = MARIADB["user"], MARIADB["password"]
    connection = mariadb_admin()
    try:
        cursor = connection.cursor()
        for host in ("localhost", "127.0.0.1"):
            cursor.execute(
                f"CREATE USER IF NOT EXISTS '{user}'@'{host}' IDENTIFIED BY '{password}'"
            )
            cursor.execute(f"GRANT ALL PRIVILEGES ON `bench\\_%`.* TO '{user}'@'{host}'")
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    finally:
        connection.close()


def drive(
    system: str,
    db: str,
    op: str,
    stamps_path: Path,
    timeout: float = 600,
    echo: bool = False,
    **args: Any,
) -> Any:
    """Run one driver op in a subprocess with the system's settings; its JSON result.
    ``echo``: its stderr (progress of a long op) goes to ours as it comes."""
    if system in FLOORS:
        args.setdefault("target", floor_target(db, system))
    done = subprocess.run(
        [sys.executable, "-m", "bench.driver", system, db, op, json.dumps(args)],
        cwd=ROOT,
        env=base_env(system, db, stamps_path),
        stdout=subprocess.PIPE,
        stderr=None if echo else subprocess.PIPE,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        said = "(its stderr is above)" if echo else done.stderr[-3000:]
        raise RuntimeError(f"driver {system} {db} {op} failed:\n{said}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def prepare(system: str, db: str, work: Path) -> None:
    """Drop and create ``system``'s database on ``db`` (its SQLite files), then migrate it."""
    if db == "postgres" and system in PG_DATABASES:
        import psycopg

        name = PG_DATABASES[system]
        with psycopg.connect(dbname="postgres", autocommit=True, **PG) as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            connection.execute(f"CREATE DATABASE {name}")
    if db == "mariadb" and system in MARIADB_DATABASES:
        create_mariadb_database(MARIADB_DATABASES[system])
    if db == "sqlite":
        stem = "watchdog_bench" if system == "watchdog" else f"bench_{system}"
        for path in SQLITE_DIR.glob(f"{stem}.sqlite3*"):
            path.unlink()
    drive(system, db, "setup", work / "stamps-setup.txt")


#: ``watchdog_worker --batch``: jobs a job thread claims and settles at once (--watchdog-batch).
WATCHDOG_BATCH = 32
#: The lanes watchdog's workers serve: the bench's jobs' lane, or, with --watchdog-every-lane,
#: no flag (every lane with a handler: ``bench`` and ``bench-sleep``, a claim over two lanes).
WATCHDOG_LANES = ["--lane", "bench"]


def worker_command(
    system: str, db: str, concurrency: int, index: int, default_worker: bool = False
) -> list[str]:
    """How a user would start the system's worker. watchdog: with ``--batch WATCHDOG_BATCH``,
    or as the default worker (``default_worker``: no ``--batch``, one job per transaction)."""
    py = sys.executable
    if system == "watchdog":
        batch = [] if default_worker else ["--batch", str(WATCHDOG_BATCH)]
        return [
            py,
            "-m",
            "django",
            "watchdog_worker",
            *WATCHDOG_LANES,
            "--concurrency",
            str(concurrency),
            *batch,
            "--log-level",
            "WARNING",
            "--worker-id",
            f"bench-{index}-{os.getpid()}",
        ]
    if system == "tasks_db":
        return [
            py,
            "-m",
            "django",
            "db_worker",
            "--queue-name",
            "default",
            "--interval",
            "0.1",
            "--no-startup-delay",
            "--no-reload",
            "--verbosity",
            "0",
        ]
    if system == "procrastinate":
        return [
            str(BIN / "procrastinate"),
            "--app=bench.peers.procrastinate_app.app",
            "worker",
            "--concurrency",
            str(concurrency),
            "--name",
            f"bench-{index}",
        ]
    if system == "celery":
        return [
            str(BIN / "celery"),
            "-A",
            "bench.peers.celery_app",
            "worker",
            "--pool",
            "solo",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-Q",
            "bench",
            "--loglevel",
            "WARNING",
            "-n",
            f"bench{index}@%h",
        ]
    if system in FLOORS:
        flags = {
            "floor": [],
            "floor_jobs": ["--job-table"],
            "floor_chained": ["--chained"],
            "floor_jobs_chained": ["--job-table", "--chained"],
            "floor_worker": ["--worker-statements"],
        }[system]
        return [py, "-m", "bench.floor", db, floor_target(db, system), *flags]
    raise ValueError(system)


class Workers:
    """``count`` worker processes of one system; stopped (TERM, then KILL) on exit."""

    def __init__(
        self,
        system: str,
        db: str,
        count: int,
        concurrency: int,
        stamp_file: Path,
        log_dir: Path,
        extra: list[str] | None = None,
        default_worker: bool = False,
    ) -> None:
        self.popens: list[subprocess.Popen[bytes]] = []
        env = base_env(system, db, stamp_file)
        for index in range(count):
            command = worker_command(system, db, concurrency, index, default_worker)
            if extra:
                command = [c for c in command if c not in WATCHDOG_LANES] + extra
            out = (log_dir / f"{system}-{db}-{index}.log").open("ab")
            self.popens.append(
                subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
            )

    def check_alive(self) -> None:
        for popen in self.popens:
            if popen.poll() is not None:
                raise RuntimeError(f"worker {popen.args} exited with {popen.returncode}")

    def peak_rss_mb(self) -> float:
        """Largest VmHWM (peak resident set) among the workers and their children."""
        import psutil

        peak = 0
        for popen in self.popens:
            try:
                tree = [psutil.Process(popen.pid)]
                tree += tree[0].children(recursive=True)
            except psutil.NoSuchProcess:
                continue
            for process in tree:
                try:
                    status = Path(f"/proc/{process.pid}/status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        return round(peak / 1024, 1)

    def stop(self) -> None:
        for popen in self.popens:
            if popen.poll() is None:
                popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for popen in self.popens:
            try:
                popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Stamps:
    """Reads the stamp file incrementally: handler start times by tag prefix."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.times: dict[str, float] = {}
        self.by_prefix: dict[str, list[float]] = {}
        path.unlink(missing_ok=True)
        path.touch()

    def read(self) -> None:
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.decode().splitlines():
            tag, _pid, at = line.split(" ")
            self.times[tag] = float(at)
            self.by_prefix.setdefault(tag.rsplit(":", 1)[0], []).append(float(at))

    def wait(
        self, prefix: str, count: int, timeout: float, workers: Workers | None = None
    ) -> list[float]:
        deadline = time.monotonic() + timeout
        while True:
            self.read()
            seen = self.by_prefix.get(prefix, [])
            if len(seen) >= count:
                return seen
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(seen)}/{count} jobs of {prefix} ran in {timeout}s")
            if workers is not None:
                workers.check_alive()
            time.sleep(0.01)


# -- workloads -----------------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.sizes = SMOKE if args.smoke else QUICK if args.quick else DEFAULT
        if args.jobs:
            self.sizes = Sizes(
                **{
                    **self.sizes.__dict__,
                    "drain": args.jobs,
                    "drain_queues": max(1, args.jobs // 10),
                }
            )
        if args.at_scale:
            self.sizes = Sizes(**{**self.sizes.__dict__, **AT_SCALE})
        if args.backlog:
            queued, settled = args.backlog
            self.sizes = Sizes(
                **{**self.sizes.__dict__, "flat_queued": queued, "flat_settled": settled}
            )
        self.repeat = args.repeat
        self.smoke = args.smoke
        self.procs = SMOKE_PROCS if args.smoke else (1, 2) if args.quick else WORKER_PROCS
        self.only = args.only
        self.workloads = args.workloads
        self.work = WORK
        self.work.mkdir(parents=True, exist_ok=True)
        self.logs = self.work / "logs"
        shutil.rmtree(self.logs, ignore_errors=True)
        self.logs.mkdir()
        self.results: dict[str, dict[str, dict[str, Any]]] = {}
        self.failures: list[str] = []
        self.warm_ups = 0

    log = staticmethod(log)

    def watchdog(self, db: str, op: str, stamps_path: Path, **args: Any) -> Any:
        """``drive`` for watchdog (bench/flatness.py's ops)."""
        return drive("watchdog", db, op, stamps_path, **args)

    def workers(
        self,
        db: str,
        count: int,
        stamp_file: Path,
        extra: list[str] | None = None,
        default_worker: bool = False,
    ) -> Workers:
        """``count`` watchdog worker processes of one thread."""
        return Workers("watchdog", db, count, 1, stamp_file, self.logs, extra, default_worker)

    def record(self, db: str, system: str, metric: str, runs: list[float] | float | None) -> None:
        if runs is None:
            return
        runs = runs if isinstance(runs, list) else [runs]
        entry = {"runs": [round(r, 3) for r in runs], "median": round(statistics.median(runs), 3)}
        self.results.setdefault(db, {}).setdefault(system, {})[metric] = entry
        log(f"  {db:8} {system:13} {metric:22} {entry['median']:>10}  {entry['runs']}")

    def stamps(self, name: str) -> Stamps:
        return Stamps(self.work / f"stamps-{name}.txt")

    # databases

    def prepare(self, system: str, db: str) -> None:
        prepare(system, db, self.work)

    # enqueue

    def enqueue(self, system: str, db: str) -> None:
        single, existing, bulk = [], [], []
        alone: list[float] = []
        alone_existing: list[float] = []
        stamp = self.work / "stamps-enqueue.txt"
        for rep in range(self.repeat):
            drive(system, db, "reset", stamp)
            n = self.sizes.enqueue_single
            single.append(
                n / drive(system, db, "enqueue_single", stamp, n=n, tag=f"e:{rep}")["seconds"]
            )
            if system == "watchdog":
                # Every job into one queue that already exists: its head is decided against
                # the jobs already there (the peers have no queues to compare).
                seconds = drive(system, db, "enqueue_single", stamp, n=n, tag=f"x:{rep}", queues=1)[
                    "seconds"
                ]
                existing.append(n / seconds)
            if system in ("watchdog", "tasks_db"):
                # The same calls in autocommit: each commits a transaction of its own.
                seconds = drive(
                    system, db, "enqueue_single", stamp, n=n, tag=f"a:{rep}", autocommit=True
                )["seconds"]
                alone.append(n / seconds)
            if system == "watchdog":
                seconds = drive(
                    system,
                    db,
                    "enqueue_single",
                    stamp,
                    n=n,
                    tag=f"ax:{rep}",
                    queues=1,
                    autocommit=True,
                )["seconds"]
                alone_existing.append(n / seconds)
            if system != "celery":
                n, times = self.sizes.enqueue_bulk, BULK_TRANSACTIONS
                seconds = drive(
                    system, db, "enqueue_bulk", stamp, n=n, times=times, tag=f"b:{rep}"
                )["seconds"]
                bulk.append(n * times / seconds)
        drive(system, db, "reset", stamp)
        self.record(db, system, "enqueue_single", single)
        self.record(db, system, "enqueue_single_existing", existing or None)
        self.record(db, system, "enqueue_autocommit", alone or None)
        self.record(db, system, "enqueue_autocommit_existing", alone_existing or None)
        self.record(db, system, "enqueue_bulk", bulk or None)

    # drain

    def warm_up(self, system: str, db: str, workers: Workers, stamps: Stamps, count: int) -> None:
        # A tag of its own each time: the same job ids again would be duplicates, which
        # run nothing, and their old stamps would end the wait before the workers are up.
        tag = f"w:{self.warm_ups}"
        self.warm_ups += 1
        drive(system, db, "prefill", stamps.path, n=count, queues=count, tag=tag)
        stamps.wait(tag, count, timeout=60, workers=workers)
        time.sleep(0.5)

    def drain_runs(
        self,
        system: str,
        db: str,
        workers: Workers,
        stamps: Stamps,
        n: int,
        queues: int,
        label: str,
        before_each: Callable[[], object] | None = None,
    ) -> list[float]:
        """Drain rates (jobs/s) of ``repeat`` runs; ``before_each`` runs before each one."""
        rates = []
        for rep in range(self.repeat):
            prefix = f"{label}:{rep}"
            if before_each is not None:
                before_each()
            commit = drive(system, db, "prefill", stamps.path, n=n, queues=queues, tag=prefix)[
                "commit"
            ]
            seen = stamps.wait(prefix, n, timeout=max(120.0, n / 10), workers=workers)
            rates.append(n / (max(seen) - commit))
        return rates

    def drain(self, system: str, db: str) -> None:
        procs = self.procs if self.smoke or system not in FLOORS else FLOOR_PROCS
        concurrencies = (1, 4) if system == "watchdog" and not self.smoke else (1,)
        for concurrency in concurrencies:
            for count in procs:
                drive(system, db, "reset", self.work / "stamps-reset.txt")
                stamps = self.stamps(f"{system}-{db}-drain")
                with Workers(system, db, count, concurrency, stamps.path, self.logs) as workers:
                    self.warm_up(system, db, workers, stamps, count * concurrency * 2)
                    rates = self.drain_runs(
                        system, db, workers, stamps, self.sizes.drain, self.sizes.drain_queues, "d"
                    )
                    rss = workers.peak_rss_mb()
                self.record(db, system, f"drain_p{count}_c{concurrency}", rates)
                self.record(db, system, f"rss_mb_p{count}_c{concurrency}", rss)

    # wake latency

    def latency(self, system: str, db: str) -> None:
        if system in FLOORS:
            return
        drive(system, db, "reset", self.work / "stamps-reset.txt")
        stamps = self.stamps(f"{system}-{db}-latency")
        p50, p95, p99, lost = [], [], [], 0
        with Workers(system, db, 1, 1, stamps.path, self.logs) as workers:
            self.warm_up(system, db, workers, stamps, 2)
            for rep in range(self.repeat):
                commits = drive(
                    system,
                    db,
                    "latency",
                    stamps.path,
                    k=self.sizes.latency,
                    tag=f"l:{rep}",
                    stamp_file=str(stamps.path),
                )["commits"]
                stamps.read()
                waits = sorted(
                    (stamps.times[tag] - at) * 1000
                    for tag, at in commits.items()
                    if at > 0 and tag in stamps.times
                )
                lost += len(commits) - len(waits)
                p50.append(quantile(waits, 0.50))
                p95.append(quantile(waits, 0.95))
                p99.append(quantile(waits, 0.99))
        self.record(db, system, "latency_p50_ms", p50)
        self.record(db, system, "latency_p95_ms", p95)
        self.record(db, system, "latency_p99_ms", p99)
        if lost:
            log(f"  {system} {db}: {lost} latency jobs not seen within 5 s (left out)")

    # backlog flatness (watchdog)

    def flatness(self, db: str) -> None:
        flatness.measure(self, db)

    # settled feed (watchdog)

    def feed(self, db: str) -> None:
        system, n, idle = "watchdog", self.sizes.feed, FEED_IDLE_READS
        stamp = self.work / "stamps-feed.txt"
        paged, idle_rates = [], []
        for _ in range(self.repeat):
            drive(system, db, "reset", stamp)
            timed = drive(system, db, "feed", stamp, n=n, page=FEED_PAGE, idle=idle)
            paged.append(n / timed["page_seconds"])
            idle_rates.append(idle / timed["idle_seconds"])
        drive(system, db, "reset", stamp)
        self.record(db, system, "feed_paged", paged)
        self.record(db, system, "feed_idle", idle_rates)

    # everything

    def run(self, databases: list[str]) -> None:
        celery_db = next((db for db in reversed(databases) if "celery" in APPLIES[db]), None)
        for db in databases:
            for system in self.only:
                if system == "celery" and db != celery_db:
                    continue  # Redis does not depend on the database: measured once
                if system not in APPLIES[db]:
                    continue
                log(f"{LABELS[system]} on {db}")
                steps: list[Callable[[str, str], None]] = [self.prepare]
                if "enqueue" in self.workloads and system not in FLOORS:
                    steps.append(self.enqueue)
                if "drain" in self.workloads:
                    steps.append(self.drain)
                if "latency" in self.workloads:
                    steps.append(self.latency)
                if "flatness" in self.workloads and system == "watchdog":
                    steps.append(lambda _system, db: self.flatness(db))
                if "feed" in self.workloads and system == "watchdog":
                    steps.append(lambda _system, db: self.feed(db))
                for step in steps:
                    try:
                        step(system, db)
                    except (RuntimeError, TimeoutError, subprocess.SubprocessError) as error:
                        log(f"  FAILED {system} {db} {getattr(step, '__name__', 'step')}: {error}")
                        # The end of a driver's stderr names the error; its start is noise.
                        self.failures.append(f"{system} {db}: ...{str(error)[-500:]}")
                        if step == self.prepare:
                            break
        if celery_db is not None and "celery" in self.results.get(celery_db, {}):
            for db in databases:
                if "celery" in APPLIES[db]:
                    self.results.setdefault(db, {})["celery"] = self.results[celery_db]["celery"]


def quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    index = min(len(values) - 1, max(0, round(q * (len(values) - 1))))
    return values[index]


# -- report --------------------------------------------------------------------------------

ROWS = [
    ("enqueue_single", "enqueue, 1 job/transaction (jobs/s)"),
    ("enqueue_single_existing", "enqueue, 1 job/transaction, into one existing queue (jobs/s)"),
    ("enqueue_autocommit", "enqueue, 1 job in autocommit, its own transaction (jobs/s)"),
    (
        "enqueue_autocommit_existing",
        "enqueue, 1 job in autocommit, into one existing queue (jobs/s)",
    ),
    ("enqueue_bulk", "enqueue, N jobs in 1 transaction (jobs/s)"),
    ("drain_p1_c1", "drain, 1 process (jobs/s)"),
    ("drain_p2_c1", "drain, 2 processes (jobs/s)"),
    ("drain_p4_c1", "drain, 4 processes (jobs/s)"),
    ("drain_p1_c4", "drain, 1 process x 4 threads (jobs/s)"),
    ("drain_p2_c4", "drain, 2 processes x 4 threads (jobs/s)"),
    ("drain_p4_c4", "drain, 4 processes x 4 threads (jobs/s)"),
    ("latency_p50_ms", "wake latency p50 (ms)"),
    ("latency_p95_ms", "wake latency p95 (ms)"),
    ("latency_p99_ms", "wake latency p99 (ms)"),
    ("rss_mb_p2_c1", "peak RSS per worker, 2 processes (MB)"),
    ("rss_mb_p2_c4", "peak RSS per worker, 2 x 4 threads (MB)"),
    ("flat_empty", "drain 2 processes, empty tables (jobs/s)"),
    ("flat_big", "drain 2 processes, big backlog (jobs/s)"),
    ("flatness", "backlog flatness (big / empty)"),
    ("flat_empty_default", "drain 2 default workers (no --batch), empty tables (jobs/s)"),
    ("flat_big_default", "drain 2 default workers (no --batch), big backlog (jobs/s)"),
    ("flatness_default", "backlog flatness, default worker (big / empty)"),
    ("flat_enqueue_new_ms_empty", "enqueue, 1 job/transaction, new queue, empty tables (ms)"),
    ("flat_enqueue_new_ms_big", "enqueue, 1 job/transaction, new queue, big backlog (ms)"),
    ("flat_enqueue_new_cost", "enqueue cost, new queue (big / empty)"),
    ("flat_enqueue_existing_ms_empty", "enqueue, 1 job/transaction, existing queue, empty (ms)"),
    ("flat_enqueue_existing_ms_big", "enqueue, 1 job/transaction, existing queue, big (ms)"),
    ("flat_enqueue_existing_cost", "enqueue cost, existing queue (big / empty)"),
    ("flat_enqueue_behind_ms_big", "enqueue, 1 job/transaction, behind the busy queue (ms)"),
    ("flat_enqueue_behind_cost", "enqueue cost, behind the busy queue / existing queue, empty"),
    *flat_enqueues.counted_rows(),
    ("flat_status_ms_empty", "watchdog status, in-process, empty tables (ms)"),
    ("flat_status_ms_big", "watchdog status, in-process, big backlog (ms)"),
    ("flat_admin_jobs_ms_empty", "admin job list, first page, empty tables (ms)"),
    ("flat_admin_jobs_ms_big", "admin job list, first page, big backlog (ms)"),
    ("flat_admin_queues_ms_empty", "admin queue list, first page, empty tables (ms)"),
    ("flat_admin_queues_ms_big", "admin queue list, first page, big backlog (ms)"),
    ("flat_build_rows_per_s", "big backlog built, INSERT ... SELECT (rows/s)"),
    ("flat_build_s", "big backlog built, INSERT ... SELECT (s)"),
    ("flat_analyze_s", "big backlog's VACUUM ANALYZE or ANALYZE (s)"),
    ("flat_checkpoint_s", "big backlog's CHECKPOINT, PostgreSQL (s)"),
    ("prune_deleted", "prune: settled rows deleted (the history's oldest tenth)"),
    ("prune_batch_size", "prune: batch size (rows per transaction)"),
    ("prune_s", "prune: the command's time, its count included (s)"),
    ("prune_rows_per_s", "prune: rows deleted per second"),
    ("prune_first_batch_s", "prune: start to the first batch's end, its count included (s)"),
    ("prune_batch_ms", "prune: one batch, median, not the first nor the last (ms)"),
    ("prune_batch_ms_max", "prune: the longest batch, not the first nor the last (ms)"),
    ("prune_last_batch_s", "prune: the last batch, which finds no more old rows (s)"),
    ("prune_drain_before", "drain 2 default workers, just before the prune (jobs/s)"),
    ("prune_drain_during", "drain 2 default workers, during the prune (jobs/s)"),
    ("prune_drain_ratio", "drain during the prune / before it"),
    ("feed_paged", f"settled feed, read in pages of {FEED_PAGE} (jobs/s)"),
    ("feed_idle", "settled feed, reads with nothing new (reads/s)"),
]


def value(results: dict[str, Any], system: str, metric: str) -> float | None:
    entry = results.get(system, {}).get(metric)
    if entry is None and metric.endswith("_c4") and system != "watchdog":
        entry = results.get(system, {}).get(metric[:-1] + "1")  # peers: compare with c1
    return None if entry is None else entry["median"]


def fmt(number: float | None) -> str:
    if number is None:
        return "n/a"
    if number >= 100:
        return f"{number:,.0f}"
    return f"{number:.2f}" if number < 10 else f"{number:.1f}"


#: How each database is named in a table's heading.
TITLES = {"sqlite": "SQLite", "postgres": "PostgreSQL", "mariadb": "MariaDB"}


def table(db: str, results: dict[str, Any], systems: list[str]) -> str:
    """One database's Markdown table; a system that does not apply there is a column of n/a."""
    others = [s for s in systems if s != "watchdog" and s in APPLIES[db]]
    header = ["metric (median)", *[LABELS[s] for s in systems]]
    if "watchdog" in systems:
        header += [f"us/{LABELS[s]}" for s in others]
    lines = [
        f"### {TITLES[db]}",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|",
    ]
    for metric, label in ROWS:
        cells = [value(results, s, metric) for s in systems]
        if all(c is None for c in cells):
            continue
        row = [label]
        for system, cell in zip(systems, cells, strict=True):
            mark = "*" if "_c4" in metric and system != "watchdog" and cell is not None else ""
            row.append(fmt(cell) + mark)
        if "watchdog" in systems:
            ours = value(results, "watchdog", metric)
            for other in others:
                theirs = value(results, other, metric)
                if ours is None or theirs is None or metric in ("flatness",) or not theirs:
                    row.append("")
                else:
                    row.append(f"{ours / theirs:.2f}x")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append(
        "\\* a peer's 1-thread figure for the same number of processes (its fastest setting)."
    )
    absent = [LABELS[s] for s in systems if s not in APPLIES[db]]
    if absent:
        lines.append(
            f"{' and '.join(absent)}: n/a on {TITLES[db]} (Procrastinate is PostgreSQL only; "
            "Celery keeps its jobs in Redis, measured in the other tables)."
        )
    return "\n".join(lines)


def charts(results: dict[str, Any], databases: list[str]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    CHARTS.mkdir(parents=True, exist_ok=True)
    made = []
    for db in databases:
        figure, axes = plt.subplots(figsize=(7, 4.5))
        series = [
            ("watchdog", 1, "watchdog (1 thread/process)"),
            ("watchdog", 4, "watchdog (4 threads/process)"),
        ]
        series += [(s, 1, LABELS[s]) for s in (*PEERS, *FLOORS)]
        for system, concurrency, label in series:
            points = [
                (p, value(results[db], system, f"drain_p{p}_c{concurrency}")) for p in WORKER_PROCS
            ]
            points = [
                (p, v)
                for p, v in points
                if v is not None and f"drain_p{p}_c{concurrency}" in results[db].get(system, {})
            ]
            if points:
                axes.plot(*zip(*points, strict=True), marker="o", label=label)
        axes.set_xlabel("worker processes")
        axes.set_ylabel("drain rate (jobs/s)")
        axes.set_xticks(WORKER_PROCS)
        axes.set_title(f"Drain rate vs worker processes, {db} (no-op jobs)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
        path = CHARTS / f"drain-vs-workers-{db}.png"
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        plt.close(figure)
        made.append(path)
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for db in databases:
        ours = results[db].get("watchdog", {})
        if "flat_big" not in ours:
            continue
        backlog = ours["flat_backlog"]
        big = backlog["queued"] + backlog["settled"]
        axes.plot(
            [0, big],
            [ours["flat_empty"]["median"], ours["flat_big"]["median"]],
            marker="o",
            label=f"watchdog, {db}",
        )
    axes.set_xscale("symlog", linthresh=1000)
    axes.set_xlabel("rows in watchdog_job besides the drained jobs (queued + settled)")
    axes.set_ylabel("drain rate, 2 processes (jobs/s)")
    axes.set_ylim(bottom=0)
    axes.set_title("Drain rate vs backlog size")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    path = CHARTS / "drain-vs-backlog.png"
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    made.append(path)
    return made


def environment() -> dict[str, Any]:
    info: dict[str, Any] = {"python": platform.python_version(), "nproc": os.cpu_count()}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        info["cpu"] = next(
            line.split(":", 1)[1].strip()
            for line in cpuinfo.splitlines()
            if line.startswith("model name")
        )
        meminfo = Path("/proc/meminfo").read_text().splitlines()[0]
        info["ram_gib"] = round(int(meminfo.split()[1]) / 1024 / 1024, 1)
    except (OSError, StopIteration):
        pass
    for package in (
        "django",
        "django-watchdog",
        "django-tasks-db",
        "procrastinate",
        "celery",
        "kombu",
        "redis",
        "psycopg",
        "mysqlclient",
    ):
        try:
            info[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            info[package] = None
    info["sqlite"] = sqlite3.sqlite_version
    try:
        import psycopg

        with psycopg.connect(dbname="postgres", **PG) as connection:
            info["postgresql"] = connection.execute("SHOW server_version").fetchone()[0]
        import redis

        info["redis_server"] = redis.Redis(host="127.0.0.1").info()["redis_version"]
    except Exception as error:  # noqa: BLE001 - informative only
        info["services_error"] = repr(error)
    try:
        connection = mariadb_admin()
        cursor = connection.cursor()
        cursor.execute("SELECT VERSION()")
        info["mariadb"] = cursor.fetchone()[0]
        connection.close()
    except Exception as error:  # noqa: BLE001 - informative only
        info["mariadb_error"] = repr(error)
    try:
        info["commit"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "django_watchdog"],
            cwd=ROOT,
            capture_output=True,
            text=True,
        ).stdout.strip()
        info["django_watchdog_dirty"] = bool(dirty)
    except OSError:
        pass
    return info


def _backlog(text: str) -> tuple[int, int]:
    """``--backlog QUEUED,SETTLED``: two whole numbers, the queued at least 1."""
    try:
        queued, settled = (int(part.replace("_", "")) for part in text.split(","))
    except ValueError as error:
        raise argparse.ArgumentTypeError(
            f"{text!r}: write QUEUED,SETTLED, e.g. 100000,200000"
        ) from error
    if queued < 1 or settled < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: QUEUED at least 1, SETTLED at least 0")
    return queued, settled


def main() -> None:
    global WATCHDOG_BATCH, WATCHDOG_LANES
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, 1 repetition, no charts: proves every path runs (tests/bench)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="repetitions, median reported (default 3; 1 with --quick)",
    )
    parser.add_argument(
        "--only", default=",".join(SYSTEMS), help=f"comma-separated subset of {','.join(SYSTEMS)}"
    )
    parser.add_argument(
        "--db",
        choices=[*DATABASES, *DB_CHOICES],
        default="both",
        help="a database, both (sqlite and postgres; the default) or all (the three)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=0,
        help="drain backlog size, over jobs/10 queues (default 1000; quick 200)",
    )
    parser.add_argument(
        "--watchdog-batch",
        type=int,
        default=WATCHDOG_BATCH,
        metavar="N",
        help=f"watchdog_worker --batch (default {WATCHDOG_BATCH}; 1 = one job per transaction)",
    )
    parser.add_argument(
        "--watchdog-every-lane",
        action="store_true",
        help="start watchdog's workers with no --lane, as a plain watchdog_worker: every lane "
        "with a handler (default: --lane bench, the lane of the bench's jobs)",
    )
    parser.add_argument(
        "--workloads",
        default=",".join(WORKLOADS),
        help=f"comma-separated subset of {','.join(WORKLOADS)} (default: all)",
    )
    parser.add_argument(
        "--at-scale",
        action="store_true",
        help="flatness with 1,000,000 queued and 10,000,000 settled rows (long: use with "
        "--workloads flatness --db postgres)",
    )
    parser.add_argument(
        "--backlog",
        type=_backlog,
        default=None,
        metavar="QUEUED,SETTLED",
        help="the flatness backlog's rows: queued behind the busy queue, and settled "
        "(default 99000,1000000; --at-scale 990000,10000000), e.g. to try --at-scale smaller",
    )
    parser.add_argument("--no-charts", action="store_true")
    parser.add_argument(
        "--results",
        type=Path,
        default=RESULTS,
        metavar="DIR",
        help="where the JSON and Markdown results go (default bench/results)",
    )
    parser.add_argument(
        "--reuse",
        metavar="JSON",
        help="take the systems not in --only from an earlier results file (tables, charts)",
    )
    args = parser.parse_args()
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = set(args.only) - set(SYSTEMS)
    if unknown:
        parser.error(f"--only: unknown systems {sorted(unknown)}")
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = set(args.workloads) - set(WORKLOADS)
    if unknown:
        parser.error(f"--workloads: unknown workloads {sorted(unknown)}")
    if args.repeat is None:
        args.repeat = 1 if args.quick or args.smoke else 3
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    databases = DB_CHOICES.get(args.db, [args.db])
    WATCHDOG_BATCH = args.watchdog_batch
    if args.watchdog_every_lane:
        WATCHDOG_LANES = []
    SQLITE_DIR.mkdir(parents=True, exist_ok=True)

    started = time.monotonic()
    bench = Bench(args)
    env = environment()
    env["loadavg_at_start"] = os.getloadavg()
    env["watchdog_batch"] = WATCHDOG_BATCH
    env["watchdog_lanes"] = " ".join(WATCHDOG_LANES) or "every lane"
    if env["loadavg_at_start"][0] > 1.0:
        log(
            f"WARNING: load average {env['loadavg_at_start']}: something else is running; "
            "figures will be low and noisy"
        )
    log(f"sizes {bench.sizes}, repeat {args.repeat}, systems {args.only}, databases {databases}")
    bench.run(databases)
    elapsed = time.monotonic() - started
    shown = list(args.only)
    if args.reuse:
        earlier = json.loads(Path(args.reuse).read_text())
        env["reused"] = {"file": str(args.reuse), "environment": earlier["environment"]}
        for db in databases:
            for system, metrics in earlier["results"].get(db, {}).items():
                if system not in args.only:
                    bench.results.setdefault(db, {})[system] = metrics
                    shown.append(system)

    report = [
        table(
            db,
            bench.results.get(db, {}),
            [s for s in SYSTEMS if s in shown and s in APPLIES[db] + SHOWN_AS_NA.get(db, ())],
        )
        for db in databases
    ]
    text = "\n\n".join(report)
    print(text)
    for failure in bench.failures:
        print(f"FAILED: {failure}")
    env["loadavg_at_end"] = os.getloadavg()
    print(
        f"\nbench/run {' '.join(sys.argv[1:])}: "
        f"{elapsed:.0f}s, load average at start {env['loadavg_at_start'][0]:.2f}, "
        f"at end {env['loadavg_at_end'][0]:.2f}, sizes {bench.sizes.__dict__}, "
        f"repeat {args.repeat}, watchdog --batch {WATCHDOG_BATCH}"
    )
    args.results.mkdir(parents=True, exist_ok=True)
    payload = {
        "environment": env,
        "sizes": bench.sizes.__dict__,
        "repeat": args.repeat,
        "argv": sys.argv[1:],
        "seconds": round(elapsed),
        "results": bench.results,
        "failures": bench.failures,
        "tables": text,
    }
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for name in (f"{stamp}.json", "latest.json"):
        (args.results / name).write_text(json.dumps(payload, indent=2) + "\n")
    (args.results / "latest.md").write_text(text + "\n")
    if not args.no_charts and not args.quick and not args.smoke:
        for path in charts(bench.results, databases):
            log(f"chart {path.relative_to(ROOT)}")
    log(f"results in {args.results / stamp}.json")


if __name__ == "__main__":
    main()
