"""What one ``enqueue()`` costs the client and the server, watchdog against django-tasks-db,
counted in CPU time rather than timed: a measure that holds on a busy machine.

Both systems wait for one commit's flush per enqueue, and on a shared machine their rates
move by half between runs; the CPU each side spends per enqueue moves much less. This
runs, ``--chunks`` times, one driver process per system (``bench.driver SYSTEM DB
enqueue_counted``, with the bench's settings and databases, as ``bench/run`` enqueues),
the systems' order alternating from chunk to chunk. Each process enqueues, per case,
``--enqueues`` jobs one per call after the bench's untimed warm-up, and reads around them:

- the client's CPU and the server's CPU spent serving it (the server process or thread
  behind Django's connection), as ``bench.connection_costs`` reads them from ``/proc``;
  SQLite has no server: its work is the client's, and the server's column reads 0;
- wall time, which depends on the load.

The cases: watchdog into a new queue per job and into one existing queue holding queued
jobs (every job into ``q0``; no worker runs, so the queue keeps the jobs of the warm-up and
of earlier chunks), each inside ``transaction.atomic()`` and in autocommit;
django-tasks-db's ``task.enqueue()`` the same two ways. It prints a Markdown table of
medians per enqueue (µs), and for watchdog django-tasks-db's client + server CPU divided
by watchdog's in the same transaction mode (at least 1.00x: watchdog costs no more).

Run it (django-tasks-db lives in the bench's virtualenv; ``bench/run`` builds it):
``bench/.venv-peers/bin/python -m bench.cpu_per_enqueue postgres|mariadb|sqlite [--enqueues N]
[--chunks N]``. It drops and re-creates the bench's databases (``BENCH_DB_SUFFIX``; SQLite:
its files).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from bench import bench
from bench.connection_costs import connection_id, cpu_seconds, on_cpu, serving_schedstat

SYSTEMS = ("watchdog", "tasks_db")
#: Per system, its cases: (label, queues, autocommit). ``queues`` as the driver's enqueue
#: takes it: 0 puts each job in a queue of its own, 1 every job in one queue.
CASES = {
    "watchdog": (
        ("new queue, atomic()", 0, False),
        ("new queue, autocommit", 0, True),
        ("existing queue, atomic()", 1, False),
        ("existing queue, autocommit", 1, True),
    ),
    "tasks_db": (("atomic()", 0, False), ("autocommit", 0, True)),
}


def counted(
    system: str,
    singles: Callable[[str, int, int, bool], None],
    warm_up: int,
    settle_heap: Callable[[], None],
) -> dict[str, Any]:
    """In the driver: ``warm_up`` untimed enqueues of each of ``system``'s cases
    (``singles``: the driver's loop of single enqueues), then for each number N read from
    stdin, N enqueues of each case, and one JSON line out: per case the client's and the
    server's CPU seconds and the wall seconds they took. Stops at the end of stdin."""
    from django.db import connection

    served = connection.vendor != "sqlite"  # SQLite has no server: its work is the client's
    if served:
        with connection.cursor() as cursor:
            serving = serving_schedstat(cursor, connection.vendor)
            serving_id = connection_id(cursor, connection.vendor)

    def server_cpu() -> float:
        return on_cpu(serving) if served else 0.0

    for _, queues, autocommit in CASES[system]:
        singles(f"w:{queues}{autocommit}", warm_up, queues, autocommit)
    for chunk, line in enumerate(sys.stdin):
        found = {}
        for label, queues, autocommit in CASES[system]:
            settle_heap()
            client, server, wall = cpu_seconds(), server_cpu(), time.perf_counter()
            singles(f"{chunk}:{queues}{autocommit}", int(line), queues, autocommit)
            found[label] = {
                "client": cpu_seconds() - client,
                "server": server_cpu() - server,
                "wall": time.perf_counter() - wall,
            }
        if served:
            with connection.cursor() as cursor:
                moved = connection_id(cursor, connection.vendor) != serving_id
            if moved:
                raise RuntimeError("the enqueues changed connection: the thread read is another's")
        print(json.dumps(found), flush=True)
    return {}


class Driver:
    """``bench.driver SYSTEM DB enqueue_counted``, kept running between chunks (with the
    bench's settings, as ``bench.drive`` starts a driver)."""

    def __init__(self, system: str, db: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.driver", system, db, "enqueue_counted", "{}"],
            cwd=bench.ROOT,
            env=bench.base_env(system, db, bench.WORK / "stamps-enqueue.txt"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def chunk(self, n: int) -> dict[str, dict[str, float]]:
        """``n`` enqueues of each case: the figures of each."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{n}\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the driver exited with {self.process.wait()}")
        found: dict[str, dict[str, float]] = json.loads(line)
        return found

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def table(
    db: str, runs: dict[tuple[str, str], list[dict[str, float]]], n: int, chunks: int
) -> list[str]:
    """Medians per enqueue (µs), and for watchdog django-tasks-db's figure over watchdog's
    in the same transaction mode, chunk by chunk (the two ran one after the other, so the
    machine's load moves both alike), then their median."""

    def per_enqueue(system: str, label: str, *parts: str) -> list[float]:
        return [sum(run[part] for part in parts) / n * 1e6 for run in runs[system, label]]

    def median(system: str, label: str, *parts: str) -> float:
        return statistics.median(per_enqueue(system, label, *parts))

    def against_peer(label: str, mode: str, *parts: str) -> str:
        pairs = zip(
            per_enqueue("tasks_db", mode, *parts),
            per_enqueue("watchdog", label, *parts),
            strict=True,
        )
        return f"{statistics.median(peer / ours for peer, ours in pairs):.2f}x"

    lines = [
        f"| one enqueue, {db} (µs; median of {chunks} chunks of {n}) | client CPU | server CPU | "
        "client + server | its chunks' range | wall | django-tasks-db / watchdog: "
        "client + server | … wall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for system in SYSTEMS:
        for label, _, autocommit in CASES[system]:
            both = per_enqueue(system, label, "client", "server")
            mode = "autocommit" if autocommit else "atomic()"
            cpu, wall = (
                (against_peer(label, mode, "client", "server"), against_peer(label, mode, "wall"))
                if system == "watchdog"
                else ("", "")
            )
            lines.append(
                f"| {bench.LABELS[system]}, {label} | {median(system, label, 'client'):.0f} | "
                f"{median(system, label, 'server'):.0f} | {statistics.median(both):.0f} | "
                f"{min(both):.0f}-{max(both):.0f} | {median(system, label, 'wall'):.0f} | "
                f"{cpu} | {wall} |"
            )
    return lines


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("db", choices=("postgres", "mariadb", "sqlite"))
    parser.add_argument("--enqueues", type=int, default=200, help="enqueues per case and chunk")
    parser.add_argument("--chunks", type=int, default=15)
    options = parser.parse_args()
    bench.WORK.mkdir(parents=True, exist_ok=True)
    started = load()
    for system in SYSTEMS:
        bench.prepare(system, options.db, bench.WORK)
    runs: dict[tuple[str, str], list[dict[str, float]]] = collections.defaultdict(list)
    drivers = {system: Driver(system, options.db) for system in SYSTEMS}
    try:
        for chunk in range(options.chunks):
            for system in SYSTEMS if chunk % 2 == 0 else SYSTEMS[::-1]:
                for label, figures in drivers[system].chunk(options.enqueues).items():
                    runs[system, label].append(figures)
    finally:
        for driver in drivers.values():
            driver.stop()
    lines = table(options.db, runs, options.enqueues, options.chunks)
    lines += ["", f"load average at the start: {started}; at the end: {load()}"]
    print("\n".join(lines))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
