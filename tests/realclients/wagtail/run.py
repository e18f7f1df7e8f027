"""Wagtail 8's background tasks on watchdog, against ImmediateBackend: the real-client test.

Run by scripts/real-client-wagtail with the Wagtail virtualenv's Python:

    run.py --db sqlite|postgres [--rounds 3] [--keys 1|0] [--work DIR]

For each database: migrate a fresh site once, copy it for the two runs (SQLite file copy,
PostgreSQL ``CREATE DATABASE ... TEMPLATE``); run the editor's scenario round by round on
ImmediateBackend, and on watchdog with a live worker (``--concurrency 2``) beside it,
draining between a round's edits and its deletes (see the scenario) and after them. Then,
on watchdog only, the race: a request deletes an author while the worker's index tasks
for it have read it and not yet written (arranged by the worker's race gate,
``project/home/race.py``). After each round the two end states must be equal, no index row
may name a deleted object, and no task may fail but with ``DoesNotExist`` (an update of an
object deleted before it ran; Immediate ran it before the delete). Exit 1 on any
difference. ``--keys 0`` runs watchdog without the recommended options (serial keys,
coalescing, row locks).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
SITE = HERE / "project"
DRAIN_TIMEOUT = 180.0


class Site:
    """One copy of the site: its database, media root and environment."""

    def __init__(self, work: Path, db: str, name: str, backend: str, keys: str) -> None:
        self.db, self.name, self.backend = db, name, backend
        self.root = work / "project"
        self.gate = work / f"race-gate-{name}"
        self.media = work / f"media-{name}"
        self.db_name = str(work / f"{name}.sqlite3") if db == "sqlite" else f"wagtail_rc_{name}"
        self.env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            # django_watchdog from this checkout (the cached venv holds only the pins).
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            "WAGTAIL_DB": db,
            "WAGTAIL_DB_NAME": self.db_name,
            "WAGTAIL_MEDIA": str(self.media),
            "WAGTAIL_BACKEND": backend,
            "WAGTAIL_KEYS": keys,
        }

    def manage(self, *args: str, capture: bool = False) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            sys.stderr.write(done.stdout[-5000:] + done.stderr[-5000:])
            raise SystemExit(f"{self.name}: manage.py {' '.join(args)} failed")
        return done.stdout if capture else ""

    def worker(self, log: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "manage.py", "watchdog_worker", "--concurrency", "2"],
            cwd=self.root,
            env={**self.env, "WAGTAIL_RACE_GATE": str(self.gate)},
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )


def psql(sql: str) -> None:
    user, host = os.environ.get("PGUSER", "postgres"), os.environ.get("PGHOST", "127.0.0.1")
    port = os.environ.get("PGPORT", "5432")
    subprocess.run(
        ["psql", "-q", "-U", user, "-h", host, "-p", port, "-d", "postgres", "-c", sql],
        check=True,
        capture_output=True,
    )


def prepare(work: Path, db: str, keys: str) -> tuple[Site, Site]:
    """A migrated template, copied for the Immediate and the watchdog runs."""
    shutil.copytree(SITE, work / "project", ignore=shutil.ignore_patterns("__pycache__"))
    template = Site(work, db, "template", "immediate", keys)
    if db == "postgres":
        for name in ("template", "immediate", "watchdog"):
            psql(f"DROP DATABASE IF EXISTS wagtail_rc_{name} WITH (FORCE)")
        psql("CREATE DATABASE wagtail_rc_template")
    template.manage("makemigrations", "home", "-v", "0")
    template.manage("migrate", "-v", "0")
    sites = (
        Site(work, db, "immediate", "immediate", keys),
        Site(work, db, "watchdog", "watchdog", keys),
    )
    for site in sites:
        if db == "postgres":
            psql(f"CREATE DATABASE wagtail_rc_{site.name} TEMPLATE wagtail_rc_template")
        else:
            for suffix in ("", "-wal", "-shm"):
                source = Path(template.db_name + suffix)
                if source.exists():
                    shutil.copy(source, site.db_name + suffix)
        site.media.mkdir()
        site.gate.mkdir()
    return sites


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keys", choices=["0", "1"], default="1")
    parser.add_argument("--work", type=Path)
    options = parser.parse_args()
    work = options.work or Path(tempfile.mkdtemp(prefix=f"wagtail-rc-{options.db}-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    immediate, watchdog = prepare(work, options.db, options.keys)
    print(f"== wagtail real client on {options.db}: migrated in {time.monotonic() - started:.0f} s")
    worker = watchdog.worker(work / "worker.log")
    problems: list[str] = []
    try:
        for r in range(options.rounds):
            immediate.manage("scenario", str(r), "edit")
            immediate.manage("scenario", str(r), "delete")
            watchdog.manage("scenario", str(r), "edit")
            watchdog.manage("endstate", "--drain", str(DRAIN_TIMEOUT))
            watchdog.manage("scenario", str(r), "delete")
            watchdog.manage("scenario", str(r), "race", "--gate", str(watchdog.gate))
            expected = json.loads(immediate.manage("endstate", capture=True))
            got = json.loads(
                watchdog.manage("endstate", "--drain", str(DRAIN_TIMEOUT), capture=True)
            )
            failures = [f for f in got["failures"] if f[1] != "DoesNotExist"]
            for key, value in expected["state"].items():
                if got["state"][key] != value:
                    problems.append(f"round {r}: {key} differ from ImmediateBackend's")
                    print(json.dumps({"immediate": value, "watchdog": got["state"][key]}))
            if got["stale"]:
                problems.append(f"round {r}: {len(got['stale'])} stale index rows: {got['stale']}")
            if failures:
                problems.append(f"round {r}: tasks failed: {failures}")
            print(f"round {r}: {'ok' if not problems else 'FAILED'} ({got['jobs']} jobs)")
            if problems:
                break
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
    elapsed = time.monotonic() - started
    if problems:
        print("\n".join(problems))
        print(f"worker log: {work / 'worker.log'}")
        return 1
    print(
        f"== wagtail real client on {options.db}: {options.rounds} rounds equal ({elapsed:.0f} s)"
    )
    if not options.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
