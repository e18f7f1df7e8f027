"""The default worker's CPU per job, and where it goes: a measure that holds on a busy machine.

Throughput on a shared machine measures its load; the CPU time the worker process spends
per job does not depend on it nearly as much. This starts ``watchdog_worker --lane bench
--log-level WARNING`` (otherwise no flags: one thread, one job per transaction, as
``bench/run`` starts it; ``--every-lane``: no ``--lane`` either, so it serves every lane
with a handler, as a worker started with no flags does), warms it up, then ``--repeat``
times enqueues ``--jobs`` no-op jobs over jobs / 10 queues in one transaction and waits
until the worker drained them, reading the worker's CPU time (user and system) from
``/proc/<pid>/stat`` and each of its threads' from ``/proc/<pid>/task/<tid>/stat`` before
and after. It prints CPU ms per job:

- of the worker process, user and system, per drain and their median;
- per thread (named with ``py-spy dump``: the main loop, the job thread, the heartbeat,
  the waker);
- with py-spy (``--py-spy PATH``, or ``py-spy`` on ``PATH``), one more drain sampled by
  ``py-spy record --gil`` (the thread holding the GIL: Python running, not waiting for the
  server; ``BENCH_PY_SPY_RAW`` keeps the raw samples): the job thread's samples by step
  (claim, settle, commit, run, signals, logging) and the top functions by cumulative and
  by own samples. (cProfile cannot do this on Python 3.12: one profiler sees every
  thread's calls interleaved.)

On PostgreSQL it also reads the server's CPU per job: that of the backends serving the
scratch database but the one of this script's own connection, which enqueues and polls.
With ``--floor`` it then measures ``bench.floor``'s raw loop the same way (its process, the
server, wall time), on its own table in the same scratch database, then on watchdog's job
table there (``bench.floor --job-table``): the floor's statements paying what the schema
costs (its indexes and constraints), without what the worker adds.

Run it against a scratch database (dropped and re-created): ``python -m bench.cpu_per_job
postgres|sqlite [--jobs N] [--repeat N] [--py-spy PATH] [--floor] [--every-lane]``. py-spy is not a
dependency: ``python -m venv /tmp/spy && /tmp/spy/bin/pip install py-spy``.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.roundtrips import setup

JOBS = 2000
#: py-spy's samples per second.
RATE = 500
WARM_UP = 200
LANE = "bench"
ROOT = Path(__file__).resolve().parent.parent
TICK = os.sysconf("SC_CLK_TCK")

#: Steps of the job thread, each a function whose samples (its frame anywhere in the stack)
#: are its cost: (label, file path suffix, function). Nested steps overlap their parents.
STEPS = (
    ("settle + claim next: the transaction (claims.settle)", "store/claims.py", "settle"),
    ("… lock, settle and claim, sent together", "postgres_claims.py", "settle_and_claim_alone"),
    ("… lock the job's queue", "postgres_claims.py", "PostgresClaims.lock_queue_of"),
    ("… lock the job's queue", "dialects/sqlite.py", "SqliteDialect.lock_queue_of"),
    ("… settle and refresh the head", "postgres_claims.py", "PostgresClaims.settle_and_refresh"),
    ("… settle and refresh the head", "dialects/base.py", "Dialect.settle_and_refresh"),
    ("… claim the next job", "store/claims.py", "claim_in_transaction"),
    ("… take the claimed row", "store/claims.py", "_took"),
    ("… … decode the claimed row", "store/rows.py", "to_job"),
    ("… commit", "django/db/transaction.py", "Atomic.__exit__"),
    ("… begin", "django/db/transaction.py", "Atomic.__enter__"),
    ("run the handler and decide (Decider.decide)", "engine/deciding.py", "Decider.decide"),
    ("… the handler", "benchapp/jobs.py", "noop"),
    ("log the settle, send job_finished", "engine/settling.py", "announce_settle"),
    ("turn the claim into a run (Claimer.accept)", "engine/claiming.py", "Claimer.accept"),
)


def cpu_of(stat: Path) -> tuple[float, float]:
    """(user, system) seconds from a ``/proc/.../stat`` file."""
    fields = stat.read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def threads_cpu(pid: int) -> dict[int, float]:
    """user + system seconds of each thread of ``pid``."""
    spent = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            spent[int(task.name)] = sum(cpu_of(task / "stat"))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return spent


def server_cpu(db: str, own: str | None = None) -> float:
    """user + system seconds of the server's backends serving the scratch database but the
    one of this process's own connection (``own``, by default Django's: the enqueue, and the
    polling for progress): the server's side of the jobs measured. Other databases' backends
    (another tenant's tests) and the server's background processes are left out. Only
    PostgreSQL: 0 for SQLite, whose work runs in the worker's own process."""
    if db != "postgres":
        return 0.0
    from django.db import connection

    with connection.cursor() as cursor:
        if own is None:
            cursor.execute("SELECT pg_backend_pid()")
            own = str(cursor.fetchone()[0])
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND backend_type = 'client backend'"
        )
        backends = [str(pid) for (pid,) in cursor.fetchall() if str(pid) != own]
    spent = 0.0
    for pid in backends:
        try:
            spent += sum(cpu_of(Path(f"/proc/{pid}/stat")))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return spent


def thread_names(pid: int, py_spy: str | None) -> dict[int, str]:
    names = {pid: "MainThread"}
    if py_spy is None:
        return names
    dump = subprocess.run(
        [py_spy, "dump", "--pid", str(pid)], capture_output=True, text=True, check=False
    )
    for tid, name in re.findall(r'^Thread (\d+) \(.*?\): "(.*)"$', dump.stdout, re.MULTILINE):
        names[int(tid)] = name
    return names


def role(name: str) -> str:
    if name == "MainThread":
        return "main loop"
    return "watchdog-job" if name.startswith("watchdog-job") else name


class Worker:
    """A ``watchdog_worker`` subprocess with the bench's settings; ``bare``: the default
    worker's statements in a bare loop instead (``bench.floor --worker-statements``, on
    PostgreSQL), its lane the worker's."""

    def __init__(
        self, db: str, db_name: str, *, every_lane: bool = False, bare: bool = False
    ) -> None:
        env = os.environ.copy()
        env.update(
            PYTHONPATH=str(ROOT),
            DJANGO_SETTINGS_MODULE="bench.settings",
            BENCH_SYSTEM="watchdog",
            BENCH_DB=db,
            BENCH_DB_NAME=db_name,
            BENCH_STAMP_FILE=os.devnull,
        )
        if bare:
            command = [sys.executable, "-m", "bench.floor", db, db_name, "--worker-statements"]
        else:
            lanes = [] if every_lane else ["--lane", LANE]
            command = [sys.executable, "-m", "django", "watchdog_worker", *lanes]
            command += ["--log-level", "WARNING"]
        self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
        self.pid = self.process.pid

    def cpu(self) -> tuple[float, float]:
        return cpu_of(Path(f"/proc/{self.pid}/stat"))

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class FloorLoop:
    """``python -m bench.floor postgres DSN`` on its own table in the scratch database, or
    (``job_table``) on watchdog's job table there, once the worker stopped: the same
    measure for the raw claim-and-settle loop, to compare with; ``chained``: the loop in
    the default worker's shape (``bench.floor --chained``)."""

    def __init__(self, db_name: str, *, job_table: bool = False, chained: bool = False) -> None:
        import psycopg

        from bench import floor

        self.job_table = job_table
        self.id_prefix = "floor-chained-" if chained else "floor-"  # apart from the other's
        self.dsn = f"host=127.0.0.1 user=postgres dbname={db_name}"
        self.admin = psycopg.connect(self.dsn, autocommit=True)
        if not job_table:
            self.admin.execute(floor.CREATE_POSTGRES)
        env = dict(os.environ, PYTHONPATH=str(ROOT), BENCH_STAMP_FILE=os.devnull)
        flags = (["--job-table"] if job_table else []) + (["--chained"] if chained else [])
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.floor", "postgres", self.dsn, *flags], cwd=ROOT, env=env
        )
        self.pid = self.process.pid

    def cpu(self) -> tuple[float, float]:
        return cpu_of(Path(f"/proc/{self.pid}/stat"))

    def own_backend(self) -> str:
        return str(self.admin.execute("SELECT pg_backend_pid()").fetchone()[0])

    def enqueue_and_drain(self, count: int, prefix: str, timeout: float = 600) -> float:
        from bench import floor

        started = time.perf_counter()
        if self.job_table:
            self.admin.execute(
                floor.JOB_ROWS, {"prefix": f"{self.id_prefix}{prefix}", "count": count}
            )
            left = f"SELECT count(*) FROM {floor.JOB_TABLE} WHERE {floor.JOB_LEFT}"
        else:
            self.admin.execute(
                f"INSERT INTO {floor.TABLE} (tag) SELECT %s || n FROM generate_series(1, %s) n",
                (prefix, count),
            )
            left = f"SELECT count(*) FROM {floor.TABLE} WHERE state <> 'done'"
        deadline = time.monotonic() + timeout
        while self.admin.execute(left).fetchone()[0]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{count} floor jobs not done in {timeout} s")
            time.sleep(0.02)
        return time.perf_counter() - started

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)
        self.admin.close()


def measure_floor(
    db_name: str, jobs: int, repeat: int, *, job_table: bool = False, chained: bool = False
) -> list[str]:
    """The floor's CPU per job, its process's and the server's, and its wall time; on
    watchdog's job table with ``job_table``; the chained floor's with ``chained``."""
    loop = FloorLoop(db_name, job_table=job_table, chained=chained)
    on = "on watchdog's job table" if job_table else "on its own table"
    floor = "the chained floor's" if chained else "the floor's"
    lines = [
        f"## postgres: {floor} CPU per job {on} ({jobs} rows)",
        "",
        f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        "",
        "| drain | loop CPU ms/job | server CPU ms/job | wall ms/job |",
        "|---|---:|---:|---:|",
    ]
    try:
        loop.enqueue_and_drain(WARM_UP, "warm")
        own = loop.own_backend()
        for n in range(repeat):
            before, server_before = sum(loop.cpu()), server_cpu("postgres", own)
            wall = loop.enqueue_and_drain(jobs, f"r{n}-")
            spent, served = sum(loop.cpu()) - before, server_cpu("postgres", own) - server_before
            lines.append(
                f"| {n + 1} | {spent / jobs * 1e3:.3f} | {served / jobs * 1e3:.3f} | "
                f"{wall / jobs * 1e3:.3f} |"
            )
    finally:
        loop.stop()
    return lines


def settled() -> int:
    from django_watchdog.models import Job

    return Job.objects.filter(lane=LANE, state="settled").count()


def enqueue_and_drain(worker: Worker, count: int, prefix: str, timeout: float = 600) -> float:
    """Enqueue ``count`` jobs in one transaction and wait until they settled; wall seconds."""
    import django_watchdog as wd

    before = settled()
    queues = max(1, count // 10)
    started = time.perf_counter()
    wd.enqueue_many(
        {"job_id": f"{prefix}{i}", "queue": f"{prefix}q{i % queues}", "lane": LANE}
        for i in range(count)
    )
    deadline = time.monotonic() + timeout
    while settled() < before + count:
        if worker.process.poll() is not None:
            raise RuntimeError(f"the worker exited with {worker.process.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{count} jobs not drained in {timeout} s")
        time.sleep(0.02)
    return time.perf_counter() - started


def sampled(path: Path) -> collections.Counter[tuple[str, tuple[str, ...]]]:
    """py-spy's raw output: (thread role, stack from the root) -> samples."""
    stacks: collections.Counter[tuple[str, tuple[str, ...]]] = collections.Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        thread, *frames = stack.split(";")  # "thread (<tid>): <name>", then root first
        stacks[(role(thread.partition("): ")[2]), tuple(frames))] += int(count)
    return stacks


def frame_matches(frame: str, suffix: str, function: str) -> bool:
    """Whether ``frame`` is ``function`` of a file ending in ``suffix`` (py-spy names a
    method with its class, ``Class.method``, or without it, as its version does)."""
    name, _, where = frame.partition(" (")
    named = name == function or function.endswith(f".{name}")
    return named and where.split(":")[0].endswith(suffix)


def profile_lines(stacks: collections.Counter[tuple[str, tuple[str, ...]]], top: int) -> list[str]:
    by_role: collections.Counter[str] = collections.Counter()
    for (thread, _), n in stacks.items():
        by_role[thread] += n
    total = sum(by_role.values())
    lines = ["| thread | samples holding the GIL | share |", "|---|---:|---:|"]
    for thread, n in by_role.most_common():
        lines.append(f"| {thread} | {n} | {n / total:.0%} |")
    job = {stack: n for (thread, stack), n in stacks.items() if thread == "watchdog-job"}
    job_total = sum(job.values()) or 1
    steps: collections.Counter[str] = collections.Counter()
    cumulative: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    for stack, n in job.items():
        labels = {
            label
            for label, suffix, function in STEPS
            if any(frame_matches(frame, suffix, function) for frame in stack)
        }
        for label in labels:
            steps[label] += n
        for frame in set(stack):
            cumulative[frame] += n
        if stack:
            own[stack[-1]] += n
    lines += ["", "| the job thread's samples holding the GIL | share |", "|---|---:|"]
    for label in dict.fromkeys(label for label, _, _ in STEPS):
        lines.append(f"| {label} | {steps[label] / job_total:.0%} |")
    for title, counter in (("cumulative", cumulative), ("own", own)):
        lines += [
            "",
            f"job thread: top {top} functions by {title} samples (of {job_total})",
            "",
            "```",
            *(f"{n / job_total:6.1%}  {frame}" for frame, n in counter.most_common(top)),
            "```",
        ]
    return lines


def measure(
    db: str,
    db_name: str,
    jobs: int,
    repeat: int,
    py_spy: str | None,
    top: int,
    *,
    every_lane: bool = False,
) -> list[str]:
    worker = Worker(db, db_name, every_lane=every_lane)
    lines = [
        f"## {db}: the default worker's CPU per job ({jobs} no-op jobs over {jobs // 10} queues)",
        "",
        f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
    ]
    try:
        enqueue_and_drain(worker, WARM_UP, "warm", timeout=120)
        names = thread_names(worker.pid, py_spy)
        runs = []
        served: list[float] = []
        per_thread: dict[str, list[float]] = collections.defaultdict(list)
        for n in range(repeat):
            cpu_before, threads_before = worker.cpu(), threads_cpu(worker.pid)
            server_before = server_cpu(db)
            wall = enqueue_and_drain(worker, jobs, f"r{n}-")
            cpu_after, threads_after = worker.cpu(), threads_cpu(worker.pid)
            served.append(server_cpu(db) - server_before)
            runs.append((cpu_after[0] - cpu_before[0], cpu_after[1] - cpu_before[1], wall))
            spent: collections.Counter[str] = collections.Counter()
            for tid, seconds in threads_after.items():
                name = role(names.get(tid, f"thread {tid}"))
                spent[name] += seconds - threads_before.get(tid, 0.0)
            for name, seconds in spent.items():
                per_thread[name].append(seconds)
        lines += [
            "",
            "| drain | user ms/job | system ms/job | CPU ms/job | wall ms/job (load-dependent) |",
            "|---|---:|---:|---:|---:|",
        ]

        def row(label: str, user: float, system: float, wall: float) -> str:
            return (
                f"| {label} | {user / jobs * 1e3:.3f} | {system / jobs * 1e3:.3f} | "
                f"{(user + system) / jobs * 1e3:.3f} | {wall / jobs * 1e3:.3f} |"
            )

        for n, run in enumerate(runs):
            lines.append(row(str(n + 1), *run))
        lines.append(
            row("**median**", *(statistics.median(column) for column in zip(*runs, strict=True)))
        )
        if db == "postgres":
            lines += [
                "",
                "the server's backends serving the worker, user + system, CPU ms/job "
                f"(median): {statistics.median(served) / jobs * 1e3:.3f}",
            ]
        lines += ["", "| thread | CPU ms/job (median) |", "|---|---:|"]
        for name, spent_list in sorted(per_thread.items(), key=lambda i: -statistics.median(i[1])):
            lines.append(f"| {name} | {statistics.median(spent_list) / jobs * 1e3:.3f} |")
        if py_spy is not None:
            lines += ["", *profile(worker, py_spy, jobs, top)]
        lines.append(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        worker.stop()
    return lines


def profile(worker: Worker, py_spy: str, jobs: int, top: int) -> list[str]:
    """One more drain under ``py-spy record`` (on-CPU samples, by function)."""
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(os.environ.get("BENCH_PY_SPY_RAW") or Path(scratch) / "raw.txt")
        record = subprocess.Popen(
            [py_spy, "record", "--pid", str(worker.pid), "--rate", str(RATE), "--format", "raw"]
            + ["--threads", "--gil", "--function", "--output", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.0)  # attached (the worker idles meanwhile: no samples)
        enqueue_and_drain(worker, jobs, "profiled-")
        record.send_signal(signal.SIGINT)
        record.wait(timeout=60)
        if not out.exists():
            return [f"py-spy wrote nothing: {record.stderr.read() if record.stderr else ''}"]
        return [
            f"### py-spy record --rate {RATE} --threads --gil --function: one drain of {jobs} "
            "jobs, samples of the thread holding the GIL (Python running, not waiting)",
            "",
            *profile_lines(sampled(out), top),
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", choices=("postgres", "sqlite"))
    parser.add_argument("--jobs", type=int, default=JOBS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--top", type=int, default=30, help="functions listed per profile")
    parser.add_argument("--py-spy", default=shutil.which("py-spy"), help="py-spy to profile with")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also measure the floor (postgres): bench.floor's loop, on its own table, then on "
        "watchdog's job table; then the same with --chained (the default worker's shape)",
    )
    parser.add_argument(
        "--every-lane",
        action="store_true",
        help="start the worker with no --lane: it serves every lane with a handler (bench, "
        "bench-sleep), as watchdog_worker with no flags does",
    )
    options = parser.parse_args()
    name = "watchdog_cpu_per_job" + os.environ.get("WATCHDOG_TEST_DB_SUFFIX", "")
    setup(options.db, name)
    found = measure(
        options.db,
        name,
        options.jobs,
        options.repeat,
        options.py_spy,
        options.top,
        every_lane=options.every_lane,
    )
    if options.floor and options.db == "postgres":
        for chained in (False, True):
            for job_table in (False, True):
                found += [
                    "",
                    *measure_floor(
                        name, options.jobs, options.repeat, job_table=job_table, chained=chained
                    ),
                ]
    print("\n".join(found))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
