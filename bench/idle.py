"""What an idle worker costs, and how fast it wakes: CPU time over a window from /proc, then
wake-up latency (an enqueue's commit to its handler starting) over jobs enqueued one at a time,
then how late delayed jobs start (their ``run_after`` to their handler starting), each
enqueued to the idle worker due 0.2 to 0.4 s later (sooner than its POLL_INTERVAL poll).

CPU time (utime + stime of the worker process, all its threads) hardly depends on the
machine's load, unlike wall-clock rates. Run against a scratch database (dropped and
re-created): ``python -m bench.idle postgres|sqlite|mariadb [--seconds 60] [--jobs 50]``
(its name takes ``WATCHDOG_TEST_DB_SUFFIX``, as the test databases do, so two runs on one
server do not share it).
Linux only (reads ``/proc/<pid>/stat``).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

DB_NAME = "watchdog_idle" + os.environ.get("WATCHDOG_TEST_DB_SUFFIX", "")


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def environment(db: str, stamp_file: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="bench.settings",
        BENCH_SYSTEM="watchdog",
        BENCH_DB=db,
        BENCH_DB_NAME=DB_NAME,
        BENCH_STAMP_FILE=stamp_file,
    )
    return env


def wait_for_line(path: str, needle: str, offset: int, timeout: float) -> tuple[float, int]:
    """The time the stamp line for ``needle`` records, and the file offset after it."""
    deadline = time.monotonic() + timeout
    prefix = f"{needle} ".encode()
    while time.monotonic() < deadline:
        with open(path, "rb") as handle:
            handle.seek(offset)
            chunk = handle.read()
        complete = chunk[: chunk.rfind(b"\n") + 1]
        for line in complete.splitlines():
            if line.startswith(prefix):
                return float(line.split()[2]), offset + len(complete)
        offset += len(complete)
        time.sleep(0.0005)
    raise TimeoutError(f"job {needle} did not start within {timeout} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", choices=("postgres", "sqlite", "mariadb"))
    parser.add_argument("--seconds", type=float, default=60.0, help="idle window (default 60)")
    parser.add_argument("--jobs", type=int, default=50, help="jobs for wake latency (default 50)")
    options = parser.parse_args()
    stamp_file = tempfile.mktemp(prefix="watchdog-idle-", suffix=".txt")  # noqa: S306
    open(stamp_file, "w").close()
    env = environment(options.db, stamp_file)
    os.environ.update(env)
    from bench.roundtrips import setup

    setup(options.db, DB_NAME)
    from django.db import connections, transaction
    from django.utils import timezone

    import django_watchdog as wd

    connections.close_all()
    worker = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "django", "watchdog_worker", "--lane", "bench"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wd.enqueue("warm", queue="warm", lane="bench", payload="warm")
        _, offset = wait_for_line(stamp_file, "warm", 0, 60)
        time.sleep(2.0)  # let start-up work (registration, first recovery) finish
        before, started = cpu_seconds(worker.pid), time.monotonic()
        time.sleep(options.seconds)
        cpu, wall = cpu_seconds(worker.pid) - before, time.monotonic() - started
        latencies = []
        rng = random.Random(5)
        for i in range(options.jobs):
            time.sleep(rng.uniform(0.05, 0.15))
            with transaction.atomic():
                wd.enqueue(f"w{i}", queue=f"w{i}", lane="bench", payload=f"w{i}")
            committed = time.time()
            began, offset = wait_for_line(stamp_file, f"w{i}", offset, 30)
            latencies.append((began - committed) * 1000)
        lateness = []
        for i in range(options.jobs):
            time.sleep(rng.uniform(0.05, 0.15))
            due = timezone.now() + timedelta(seconds=rng.uniform(0.2, 0.4))
            wd.enqueue(f"d{i}", queue=f"d{i}", lane="bench", payload=f"d{i}", run_after=due)
            began, offset = wait_for_line(stamp_file, f"d{i}", offset, 30)
            lateness.append((began - due.timestamp()) * 1000)
    finally:
        worker.terminate()
        worker.wait(30)
        os.unlink(stamp_file)
    print(
        f"{options.db}: idle worker CPU {cpu / wall * 100:.3f} % of a core "
        f"({cpu:.2f} s over {wall:.0f} s); wake latency {percentiles(latencies)}; "
        f"delayed jobs start late by {percentiles(lateness)} ({options.jobs} jobs each)"
    )


def percentiles(milliseconds: list[float]) -> str:
    ordered = sorted(milliseconds)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return f"p50 {statistics.median(ordered):.2f} ms, p95 {p95:.2f} ms"


if __name__ == "__main__":
    main()
