"""A prototype of the redesign the measurements pointed to, drained beside the default
worker's own statements: a job's passage through its queue (ready, claimed, running) kept
in a narrow table of its own, ``watchdog_passage``, so the job's wide row (23 indexes, the
row rules) is written twice, when it is enqueued and when it settles, instead of four times.

Both loops run the exchange a busy default worker sends per job, in one implicit transaction
on libpq's pipeline (``Dialect.fetch_together``): lock the job's queue; settle the job and
ready its queue's next head; claim the next job of the lane. ``statements`` is
``bench.floor --worker-statements`` (the store's own statements); ``passage`` the same three
on the prototype's tables: the settle deletes the job's passage row (fenced by its claim
token) and writes the job's row settled, with the claim's token, worker and start; the
next head is the queue's best passage row, readied there; the claim takes the best ready
passage row of the lane whose queue it can lock (``SKIP LOCKED``) and nothing of whose
queue runs, and answers with the job's row. Jobs are enqueued by watchdog over serial
queues (ten jobs a queue) in one transaction; for ``passage`` the same transaction copies
them into the passage table, ready as watchdog made them, and takes the job rows' ready
flags (so the prototype's claims find them only there). Retries, delays, cancellations,
recovery and every other reader of the passage are left out: it measures the hot path's
statements, not a design.

Per drain (timed from the enqueue's commit until every job settled): jobs/s; WAL bytes a
job, WAL flushes a job and their mean time (``pg_stat_wal``, the whole server's: run it on
a quiet server; the loops' sessions turn ``track_wal_io_timing`` on). ``--sync-off`` runs
the loops' sessions with ``synchronous_commit`` off (what no deployment of the default
worker may do: it measures what the commit's flush costs). The two loops alternate,
``--repeat`` drains each.

``python -m bench.passage [--jobs N] [--repeat N] [--procs N] [--sync-off]``, on a scratch
database it drops and creates (``watchdog_passage_bench`` plus ``BENCH_DB_SUFFIX``).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.drain_counts import fetch
from bench.floor import WORKER_LANE as LANE

DB_NAME = "watchdog_passage_bench"
ROOT = Path(__file__).resolve().parent.parent
MODES = ("statements", "passage")

CREATE_PASSAGE = """
CREATE TABLE watchdog_passage (
    job bigint PRIMARY KEY,
    queue varchar(256) NOT NULL,
    lane varchar(64) NOT NULL,
    priority bigint NOT NULL,
    position bigint NOT NULL,
    ready boolean NOT NULL DEFAULT false,
    claim_token varchar(64),
    claimed_by varchar(64),
    started_at timestamptz
);
CREATE INDEX watchdog_passage_claim_lane ON watchdog_passage (lane, priority DESC, position)
 WHERE ready;
CREATE INDEX watchdog_passage_head ON watchdog_passage (queue, priority DESC, position);
CREATE UNIQUE INDEX watchdog_passage_running ON watchdog_passage (queue)
 WHERE claim_token IS NOT NULL;
"""
#: The jobs of one drain (``job_id`` between ``%s`` and ``%s``) into the passage table.
ENTER_PASSAGE = """
INSERT INTO watchdog_passage (job, queue, lane, priority, position, ready)
SELECT id, queue, lane, priority, position, ready FROM watchdog_job
 WHERE job_id >= %s AND job_id < %s
"""
UNREADY_JOBS = "UPDATE watchdog_job SET ready = FALSE WHERE job_id >= %s AND job_id < %s AND ready"

LOCK_QUEUE_OF_JOB = """
SELECT q.name FROM watchdog_queue q
 WHERE q.name = (SELECT p.queue FROM watchdog_passage p WHERE p.job = %(id)s)
   FOR UPDATE OF q
"""
SETTLE_AND_REFRESH = """
WITH gone AS (
    DELETE FROM watchdog_passage WHERE job = %(id)s AND claim_token = %(token)s
    RETURNING job, queue, claim_token, claimed_by, started_at
),
settled AS (
    UPDATE watchdog_job SET state = 'settled', outcome = 'completed', result = %(result)s,
           settled_at = clock_timestamp(), attempts = attempts + 1,
           claim_token = gone.claim_token, claimed_by = gone.claimed_by,
           started_at = gone.started_at
      FROM gone WHERE watchdog_job.id = gone.job
    RETURNING watchdog_job.*
),
head AS (
    SELECT p.job, p.ready FROM watchdog_passage p
     WHERE p.queue = (SELECT queue FROM gone) AND p.job <> %(id)s
     ORDER BY p.priority DESC, p.position LIMIT 1
),
marked AS (
    UPDATE watchdog_passage SET ready = TRUE FROM head
     WHERE watchdog_passage.job = head.job AND NOT watchdog_passage.ready
       AND EXISTS (SELECT 1 FROM gone)
    RETURNING 1
)
SELECT settled.*, head.* FROM settled LEFT JOIN head ON TRUE
"""
#: As the store's claim: a row of NULLs when it took nothing but a job looked claimable.
CLAIM = """
WITH candidate AS (
    SELECT p.job, p.ctid AS address FROM watchdog_passage p
      JOIN watchdog_queue q ON q.name = ANY(ARRAY[p.queue])
     WHERE p.ready AND p.lane = %(lane)s
       AND p.queue NOT IN (SELECT r.queue FROM watchdog_passage r WHERE r.claim_token IS NOT NULL)
     ORDER BY p.priority DESC, p.position LIMIT 1
       FOR UPDATE OF q SKIP LOCKED
),
claimed AS (
    UPDATE watchdog_passage t SET ready = FALSE, claim_token = %(token)s || '.1',
           claimed_by = %(worker)s, started_at = clock_timestamp()
      FROM candidate WHERE t.ctid = candidate.address AND t.job = candidate.job AND t.ready
    RETURNING t.job, t.claim_token
)
SELECT j.id, j.payload, claimed.claim_token FROM (VALUES (1)) AS one
  LEFT JOIN (claimed JOIN watchdog_job j ON j.id = claimed.job) ON TRUE
 WHERE claimed.job IS NOT NULL
    OR EXISTS (SELECT 1 FROM watchdog_passage p WHERE p.ready AND p.lane = %(lane)s)
"""
LSN = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"
#: The server's WAL flushes so far and their time (ms). Each backend reports its counts at
#: most once a second while it runs, and as it exits: read after the loops stopped.
FLUSHES = "SELECT wal_sync, wal_sync_time FROM pg_stat_wal"
STATS_DELAY = 1.1
SETTLED = (
    "SELECT count(*) FROM watchdog_job WHERE job_id >= %s AND job_id < %s AND state = 'settled'"
)
#: The drain's jobs that did not settle as one run each should: completed, one attempt.
MISSETTLED = """
SELECT count(*) FROM watchdog_job WHERE job_id >= %s AND job_id < %s
   AND (outcome IS DISTINCT FROM 'completed' OR attempts <> 1)
"""
PASSAGE_LEFT = "SELECT count(*) FROM watchdog_passage"

_stop = False


def _on_term(signum: int, frame: object) -> None:
    global _stop
    _stop = True


def run_passage() -> None:
    """The prototype's loop, until SIGTERM: each job's exchange settles the one it ran last
    and claims the next, as ``bench.floor --worker-statements`` does with the store's."""
    from bench.floor import IDLE_POLL
    from bench.stamp import stamp
    from django_watchdog.store import waits
    from django_watchdog.store.dialects import dialect

    store = dialect("default")
    worker = f"passage-{os.getpid()}"
    ran: tuple[int, str] | None = None

    def settle(job: int, token: str) -> list[tuple[str, Any]]:
        params = {"id": job, "token": token, "result": store.param_json(None)}
        return [(LOCK_QUEUE_OF_JOB, {"id": job}), (SETTLE_AND_REFRESH, params)]

    with waits.bounded():
        while not _stop:
            claim = (CLAIM, {"lane": LANE, "token": secrets.token_urlsafe(24), "worker": worker})
            if ran is None:
                taken = store.fetch(*claim)
            else:
                *_, taken = store.fetch_together([*settle(*ran), claim])
            job, payload, token = taken[0] if taken else (None, None, None)
            if job is None:
                ran = None
                if not taken:  # nothing claimable (a row of NULLs: one was passed over)
                    time.sleep(IDLE_POLL)
                continue
            stamp(payload and json.loads(payload))
            ran = (job, token)
        if ran is not None:
            store.fetch_together(settle(*ran))


def drain(mode: str, procs: int, jobs: int, sync_off: bool) -> dict[str, float]:
    """One drain of ``jobs`` by ``procs`` loops of ``mode``: its figures."""
    from django.db import transaction

    import django_watchdog as wd

    options = "-c track_wal_io_timing=on" + (" -c synchronous_commit=off" if sync_off else "")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PGOPTIONS": options}
    loops = [
        subprocess.Popen([sys.executable, "-m", "bench.passage", "--loop", mode], cwd=ROOT, env=env)
        for _ in range(procs)
    ]
    try:
        time.sleep(3)  # each loop is polling
        prefix = f"{mode[0]}{time.monotonic_ns()}-"
        queues = max(1, jobs // 10)
        with transaction.atomic():
            for start in range(0, jobs, 5000):
                wd.enqueue_many(
                    {"job_id": f"{prefix}{n:07d}", "queue": f"{prefix}q{n % queues}", "lane": LANE}
                    for n in range(start, min(jobs, start + 5000))
                )
            if mode == "passage":
                fetch(ENTER_PASSAGE, prefix, prefix + "~")
                fetch(UNREADY_JOBS, prefix, prefix + "~")
        lsn, flushed = fetch(LSN)[0][0], fetch(FLUSHES)[0]
        started = time.perf_counter()
        deadline = started + max(60.0, jobs / 50)
        while (settled := fetch(SETTLED, prefix, prefix + "~")[0][0]) < jobs:
            if any(loop.poll() is not None for loop in loops):
                raise RuntimeError(f"a {mode} loop exited")
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{mode}: only {settled} of {jobs} jobs settled in time")
            time.sleep(0.01)
        wall = time.perf_counter() - started
        wal = float(fetch(LSN)[0][0] - lsn)
    finally:
        for loop in loops:
            loop.send_signal(signal.SIGTERM)
        for loop in loops:
            loop.wait()
    time.sleep(STATS_DELAY)
    after = fetch(FLUSHES)[0]
    missettled = fetch(MISSETTLED, prefix, prefix + "~")[0][0]
    left = fetch(PASSAGE_LEFT)[0][0]
    if missettled or left:
        raise RuntimeError(f"{mode}: {missettled} jobs settled wrong, {left} passage rows left")
    flushes = after[0] - flushed[0]
    fetch("VACUUM (ANALYZE) watchdog_job")
    fetch("VACUUM (ANALYZE) watchdog_passage")
    fetch("VACUUM (ANALYZE) watchdog_queue")
    time.sleep(STATS_DELAY)  # the vacuums' flushes reported before the next drain's count
    return {
        "jobs/s": jobs / wall,
        "WAL bytes a job": wal / jobs,
        "WAL flushes a job": flushes / jobs,
        "ms a flush": (after[1] - flushed[1]) / max(flushes, 1),
    }


def measure(options: argparse.Namespace) -> None:
    from bench.roundtrips import setup

    setup("postgres", DB_NAME + os.environ.get("BENCH_DB_SUFFIX", ""))
    fetch(CREATE_PASSAGE)
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for _ in range(options.repeat):
        for mode in MODES:
            run = drain(mode, options.procs, options.jobs, options.sync_off)
            runs[mode].append(run)
            print(mode, json.dumps({name: round(value, 3) for name, value in run.items()}))
    sync = "off" if options.sync_off else "on"
    print(
        f"| {options.procs} process(es), {options.jobs} jobs, synchronous_commit {sync}"
        " (median) | " + " | ".join(runs["statements"][0]) + " |"
    )
    print("|---|" + "---:|" * len(runs["statements"][0]))
    for mode in MODES:
        medians = [statistics.median(run[name] for run in runs[mode]) for name in runs[mode][0]]
        print(f"| {mode} | " + " | ".join(f"{value:,.2f}" for value in medians) + " |")
    print(f"load average {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=4000, help="jobs a drain, ten a queue")
    parser.add_argument("--repeat", type=int, default=3, help="drains of each loop")
    parser.add_argument("--procs", type=int, default=2, help="loops draining together")
    parser.add_argument(
        "--sync-off", action="store_true", help="the loops' sessions: synchronous_commit off"
    )
    parser.add_argument("--loop", choices=MODES, help=argparse.SUPPRESS)
    options = parser.parse_args()
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"  # not a caller's (a test run's)
    if options.loop is None:
        measure(options)
        return
    os.environ.update(
        BENCH_SYSTEM="watchdog",
        BENCH_DB="postgres",
        BENCH_DB_NAME=DB_NAME + os.environ.get("BENCH_DB_SUFFIX", ""),
        BENCH_STAMP_FILE=os.devnull,
    )
    signal.signal(signal.SIGTERM, _on_term)
    if options.loop == "passage":
        import django

        django.setup()
        run_passage()
    else:
        from bench import floor

        signal.signal(signal.SIGTERM, floor._on_term)
        floor.run_worker_statements()


if __name__ == "__main__":
    main()
