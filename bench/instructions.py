"""What an enqueue into SQLite costs the process, counted in instructions by valgrind: a
count a busy machine does not move.

Timed, a bulk enqueue of 2,000 jobs into SQLite moves by a third between runs on a shared
machine. Counted by ``valgrind --tool=callgrind``, the instructions the process runs
(Python's and SQLite's alike: SQLite runs in the process) repeat to within a few in
200,000 with a fixed hash seed. This runs the bench's settings and database twice under
callgrind (a fresh SQLite file each time): once with the warm-up alone, once with
``--rounds`` rounds after it, and prints the difference per job. A round is, for
``--op bulk``, one transaction of ``--jobs`` jobs (watchdog's ``enqueue_many``, each job
into a queue of its own, as ``bench/run``'s bulk workload; django-tasks-db's
``task.enqueue()`` per job inside one ``atomic()``); for ``--op single``, one enqueue
inside ``transaction.atomic()``. What the kernel does (the WAL's writes) is not counted.

Run it (django-tasks-db lives in the bench's virtualenv; ``bench/run`` builds it):
``bench/.venv-peers/bin/python -m bench.instructions [--system watchdog|tasks_db]
[--op bulk|single] [--rounds N] [--jobs N]``. About a minute per system under valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

#: Untimed first calls, as the bench's warm-up: connecting, filling caches.
WARM_UP = 20
COLLECTED = re.compile(r"Collected : (\d+)")


def run_rounds(system: str, op: str, rounds: int, jobs: int) -> None:
    """In this process: migrate, warm up, then ``rounds`` rounds of ``op``."""
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import transaction

    call_command("migrate", verbosity=0)
    if system == "watchdog":
        import django_watchdog as wd

        def one(tag: str) -> None:
            wd.enqueue(tag, queue=f"q-{tag}", lane="bench", payload=tag)

        def many(tag: str, n: int) -> None:
            wd.enqueue_many(
                {"job_id": f"{tag}:{i}", "queue": f"q-{tag}:{i}", "lane": "bench", "payload": tag}
                for i in range(n)
            )
    else:
        from bench.benchapp.tasks import noop

        def one(tag: str) -> None:
            noop.enqueue(tag)

        def many(tag: str, n: int) -> None:
            with transaction.atomic():
                for i in range(n):
                    noop.enqueue(f"{tag}:{i}")

    def single(tag: str, n: int) -> None:
        for i in range(n):
            with transaction.atomic():
                one(f"{tag}:{i}")

    if op == "bulk":
        many("warm", WARM_UP)
        for r in range(rounds):
            many(f"r{r}", jobs)
    else:
        single("warm", WARM_UP)
        single("r", rounds)


def counted(system: str, op: str, rounds: int, jobs: int) -> int:
    """The instructions of a child process running ``rounds`` rounds, as callgrind counts."""
    with tempfile.TemporaryDirectory(prefix="watchdog-instructions-") as files:
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "bench.settings",
            "BENCH_SYSTEM": system,
            "BENCH_DB": "sqlite",
            "BENCH_SQLITE_DIR": files,
            "PYTHONHASHSEED": "0",
        }
        command = [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-m",
            "bench.instructions",
            "--child",
            f"--system={system}",
            f"--op={op}",
            f"--rounds={rounds}",
            f"--jobs={jobs}",
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    found = COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"valgrind's run failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.instructions", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--system",
        choices=("watchdog", "tasks_db"),
        default="watchdog",
        help="watchdog, or django-tasks-db's task.enqueue() (default watchdog)",
    )
    parser.add_argument(
        "--op",
        choices=("bulk", "single"),
        default="bulk",
        help="bulk: --jobs jobs per transaction, each into a new queue; single: one enqueue "
        "per atomic() (default bulk)",
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="bulk: transactions (4); single: enqueues (500)"
    )
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per bulk transaction")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    rounds = args.rounds if args.rounds is not None else (4 if args.op == "bulk" else 500)
    if rounds < (0 if args.child else 1) or args.jobs < 1:
        parser.error("--rounds and --jobs must be at least 1")
    if args.child:
        run_rounds(args.system, args.op, rounds, args.jobs)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is missing (Debian: apt-get install valgrind)")
    base = counted(args.system, args.op, 0, args.jobs)
    total = counted(args.system, args.op, rounds, args.jobs)
    per = rounds * (args.jobs if args.op == "bulk" else 1)
    print(
        f"{args.system} {args.op} on SQLite: {(total - base) / per:,.0f} instructions a job "
        f"({rounds} round{'s' if rounds != 1 else ''}"
        f"{f' of {args.jobs} jobs' if args.op == 'bulk' else ''}; "
        f"{base:,} for the warm-up run alone)"
    )


if __name__ == "__main__":
    main()
