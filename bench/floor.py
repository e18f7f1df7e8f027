"""The floor: a raw loop doing only the minimal claim-and-settle statements per job.

Its own table (``bench_floor``), no framework. Per job:

    claim:  BEGIN; SELECT id, tag ... WHERE state = 'queued' ORDER BY id LIMIT 1
            FOR UPDATE SKIP LOCKED; UPDATE ... SET state = 'running', token = ...; COMMIT
    run:    stamp(tag)                      (the same no-op every system runs)
    settle: UPDATE ... SET state = 'done' WHERE id = ... AND token = ...; COMMIT

On SQLite the claim is ``BEGIN IMMEDIATE`` (the write lock) instead of ``SKIP LOCKED``.
On MariaDB the statements are PostgreSQL's, at READ COMMITTED (as watchdog's connections),
with an index on (state, id) for the partial index MariaDB does not have.

``--job-table`` (PostgreSQL): the same loop on watchdog's own job table (``watchdog_job``,
in a database migrated for watchdog that no worker serves), with every index and
constraint it has: the claim reads the claim index (the ready jobs, best first), the take
and the settle write what the table's constraints ask of a running and of a settled job.
What it costs beside the floor on its own table is what the schema costs; what the default
worker costs beside it is what the worker does besides (the queue's lock, the claim's lane,
due and serial checks, the next head readied, the settled feed). Its rows: ``JOB_ROWS``.

``--chained`` (PostgreSQL): the default worker's shape with nothing else of it. One
statement in autocommit per job settles the job the loop ran last and claims the next
(``CHAIN``, or ``CHAIN_JOB`` on watchdog's table): one round trip and one commit a job,
and a job is claimed, committed, before it runs, as the default worker does it; no
queue lock, no head readied, no feed, the claimed row's columns only. What the default
worker costs beside it is what its guarantees and its Python cost; what it costs beside
Celery is what a loop of that shape costs, on this table or on the smallest one.

``--worker-statements`` (PostgreSQL): the default worker's own statements with nothing
else of it. Per job, the exchange a busy default worker sends (lock the job's queue;
settle it and ready its queue's next head; claim the next job: the three statements as
the store writes them, with the worker's parameters, sent together on libpq's pipeline,
one implicit transaction), the rows taken as they come (no ``Job`` made of them), the tag
stamped; no threads, no handler, no signals or log. A claim that passed a claimable job
over (its queue locked, or the job taken first by another loop: its row of NULLs) is sent
again at once, as the worker's main loop claims again at once; only a claim that found
nothing waits for the next poll. Its jobs are watchdog's, enqueued by
watchdog into serial queues (``bench.driver``'s ``floor_worker``), in the database
``bench.settings`` names (``BENCH_DB_NAME``; ``TARGET`` is not read). What the default worker
costs beside it is what the worker's Python costs; what it costs beside the floors is what
the statements that keep the worker's guarantees cost.

Run as ``python -m bench.floor postgres|mariadb|sqlite TARGET [--job-table] [--chained]
[--worker-statements]`` (``TARGET``: a database URL, or a SQLite file); stops on SIGTERM.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sqlite3
import sys
import time
from typing import Any
from urllib.parse import urlsplit

from .stamp import stamp

TABLE = "bench_floor"
CREATE_POSTGRES = f"""
DROP TABLE IF EXISTS {TABLE};
CREATE TABLE {TABLE} (id bigserial PRIMARY KEY, tag text NOT NULL,
                      state text NOT NULL DEFAULT 'queued', token text);
CREATE INDEX {TABLE}_queued ON {TABLE} (id) WHERE state = 'queued';
"""
CREATE_SQLITE = f"""
DROP TABLE IF EXISTS {TABLE};
CREATE TABLE {TABLE} (id integer PRIMARY KEY AUTOINCREMENT, tag text NOT NULL,
                      state text NOT NULL DEFAULT 'queued', token text);
CREATE INDEX {TABLE}_queued ON {TABLE} (id) WHERE state = 'queued';
"""
CREATE_MARIADB = (
    f"DROP TABLE IF EXISTS {TABLE}",
    f"""CREATE TABLE {TABLE} (id bigint AUTO_INCREMENT PRIMARY KEY, tag varchar(255) NOT NULL,
                          state varchar(16) NOT NULL DEFAULT 'queued', token varchar(32),
                          INDEX {TABLE}_queued (state, id)) ENGINE=InnoDB""",
)
CLAIM = f"SELECT id, tag FROM {TABLE} WHERE state = 'queued' ORDER BY id LIMIT 1"
SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"
TAKE = f"UPDATE {TABLE} SET state = 'running', token = %s WHERE id = %s"
SETTLE = f"UPDATE {TABLE} SET state = 'done' WHERE id = %s AND token = %s"
#: The floor's statements on watchdog's job table (``--job-table``): ``%(count)s`` rows, each
#: its own queue (the floor has no serial queues), ready, in the ``floor`` lane; each its tag
#: (``%(prefix)s<n>``, n from 0) as job id, queue and payload.
JOB_TABLE = "watchdog_job"
JOB_ROWS = f"""
INSERT INTO {JOB_TABLE} (id, job_id, queue, lane, priority, payload, state, recovery_count,
                         ready, enqueued_at, position, delayed, attempts)
SELECT id, %(prefix)s::text || n, %(prefix)s::text || n, 'floor', 0,
       to_jsonb(%(prefix)s::text || n), 'queued', 0, TRUE, now(), id, FALSE, 0
  FROM (SELECT n, nextval(pg_get_serial_sequence('{JOB_TABLE}', 'id')) AS id
          FROM generate_series(0, %(count)s - 1) AS n) AS numbered
"""
#: The floor's rows not yet settled.
JOB_LEFT = "lane = 'floor' AND state <> 'settled'"
CLAIM_JOB = (
    f"SELECT id, payload FROM {JOB_TABLE} WHERE ready ORDER BY priority DESC, position LIMIT 1"
)
TAKE_JOB = f"""UPDATE {JOB_TABLE} SET state = 'running', ready = FALSE, claim_token = %s,
       claimed_by = 'floor', started_at = now(), attempts = attempts + 1 WHERE id = %s"""
SETTLE_JOB = f"""UPDATE {JOB_TABLE} SET state = 'settled', outcome = 'completed',
       claim_token = NULL, settled_at = now() WHERE id = %s AND claim_token = %s"""
#: ``--chained``: settle the job run last (``%(ran)s`` under ``%(ran_token)s``; none at
#: first) and claim the next under ``%(token)s``, in one statement.
CHAIN = f"""
WITH settled AS (UPDATE {TABLE} SET state = 'done' WHERE id = %(ran)s AND token = %(ran_token)s),
next AS (SELECT id FROM {TABLE} WHERE state = 'queued' ORDER BY id LIMIT 1{SKIP_LOCKED})
UPDATE {TABLE} AS t SET state = 'running', token = %(token)s FROM next WHERE t.id = next.id
RETURNING t.id, t.tag
"""
CHAIN_JOB = f"""
WITH settled AS (
    UPDATE {JOB_TABLE} SET state = 'settled', outcome = 'completed', claim_token = NULL,
           settled_at = now()
     WHERE id = %(ran)s AND claim_token = %(ran_token)s
),
next AS (
    SELECT id FROM {JOB_TABLE} WHERE ready ORDER BY priority DESC, position LIMIT 1{SKIP_LOCKED}
)
UPDATE {JOB_TABLE} AS j SET state = 'running', ready = FALSE, claim_token = %(token)s,
       claimed_by = 'floor', started_at = now(), attempts = attempts + 1
  FROM next WHERE j.id = next.id
RETURNING j.id, j.payload
"""
IDLE_POLL = 0.005
#: The loop's flags, each on PostgreSQL only.
POSTGRES_ONLY = ("--job-table", "--chained", "--worker-statements")
_stop = False


def _on_term(signum: int, frame: object) -> None:
    global _stop
    _stop = True


def connect_sqlite(path: str) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=20, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    return connection


def connect_mariadb(url: str) -> Any:
    """A MySQLdb connection (autocommit off, READ COMMITTED) to ``mariadb://user:pw@host:port/db``."""
    import MySQLdb

    parts = urlsplit(url)
    connection = MySQLdb.connect(
        host=parts.hostname or "127.0.0.1",
        port=parts.port or 3306,
        user=parts.username or "",
        password=parts.password or "",
        database=parts.path.lstrip("/"),
        charset="utf8mb4",
    )
    connection.cursor().execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    return connection


def run_locking(
    connection: Any, claim: str = CLAIM, take: str = TAKE, settle: str = SETTLE
) -> None:
    """The claim-run-settle loop on a DB-API connection whose server has SKIP LOCKED."""
    while not _stop:
        token = secrets.token_hex(16)
        with connection.cursor() as cursor:
            cursor.execute(claim + SKIP_LOCKED)
            row = cursor.fetchone()
            if row is not None:
                cursor.execute(take, (token, row[0]))
        connection.commit()
        if row is None:
            time.sleep(IDLE_POLL)
            continue
        stamp(row[1])
        with connection.cursor() as cursor:
            cursor.execute(settle, (row[0], token))
        connection.commit()


def run_chained(connection: Any, chain: str, settle: str) -> None:
    """The ``--chained`` loop on a psycopg connection in autocommit: each statement settles
    the job run last and claims the next; on stop, the job run last is settled alone
    (``settle``)."""
    nothing_ran: dict[str, Any] = {"ran": None, "ran_token": None}
    ran = nothing_ran
    while not _stop:
        token = secrets.token_hex(16)
        row = connection.execute(chain, {**ran, "token": token}, prepare=True).fetchone()
        if row is None:
            ran = nothing_ran
            time.sleep(IDLE_POLL)
            continue
        stamp(row[1])
        ran = {"ran": row[0], "ran_token": token}
    if ran is not nothing_ran:
        connection.execute(settle, (ran["ran"], ran["ran_token"]))


#: The lane the worker's statements claim from, as ``bench/run`` starts watchdog's workers.
WORKER_LANE = "bench"


def run_worker_statements() -> None:
    """The ``--worker-statements`` loop, on the database ``bench.settings`` names (the
    environment ``bench/run`` gives a floor on watchdog's table)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")
    import django

    django.setup()
    from django_watchdog.store import claims, rows, waits
    from django_watchdog.store.dialects import dialect
    from django_watchdog.store.dialects import postgres_claims as statements

    store = dialect("default")
    if not store.pipelined():
        raise SystemExit("--worker-statements: the store would not send them together here")
    partition = claims.Partition(lanes=(WORKER_LANE,))
    quiet = claims.quiet_lanes(partition)
    worker_id = f"floor-worker-{os.getpid()}"
    columns = [rows.column_index(name) for name in ("job_id", "claim_token", "payload")]
    ran: tuple[str, str] | None = None

    def settle(job_id: str, token: str) -> list[tuple[str, Any]]:
        params = {"outcome": "completed", "reason": None, "result": store.param_json(None)}
        params |= {"traceback": None, "job_id": job_id, "claim_token": token}
        return [
            statements.lock_queue_of_job(job_id),
            statements.settle_and_refresh(params, quiet),
        ]

    with waits.bounded():  # as the worker's settles are
        while not _stop:
            claim = claims.claim_statement(
                "default", partition, token=claims.new_claim_token(), worker_id=worker_id
            )
            if ran is None:
                taken = store.fetch(*claim)
            else:
                *_, taken = store.fetch_together([*settle(*ran), claim])
            job_id, token, payload = (taken[0][c] for c in columns) if taken else (None,) * 3
            if job_id is None:
                ran = None
                if not taken:  # nothing claimable (a row of NULLs: one was passed over)
                    time.sleep(IDLE_POLL)
                continue
            stamp(payload and json.loads(payload))  # Django's connections load jsonb as text
            ran = (job_id, token)
        if ran is not None:
            store.fetch_together(settle(*ran))


def run_postgres(
    dsn: str, job_table: bool = False, chained: bool = False, worker: bool = False
) -> None:
    if worker:
        run_worker_statements()
        return
    import psycopg

    if chained:
        with psycopg.connect(dsn, autocommit=True) as connection:
            if job_table:
                run_chained(connection, CHAIN_JOB, SETTLE_JOB)
            else:
                run_chained(connection, CHAIN, SETTLE)
        return
    statements = (CLAIM_JOB, TAKE_JOB, SETTLE_JOB) if job_table else (CLAIM, TAKE, SETTLE)
    with psycopg.connect(dsn) as connection:
        run_locking(connection, *statements)


def run_mariadb(
    url: str, job_table: bool = False, chained: bool = False, worker: bool = False
) -> None:
    if job_table or chained or worker:
        raise SystemExit(f"{' '.join(POSTGRES_ONLY)} run on postgres only")
    run_locking(connect_mariadb(url))


def run_sqlite(
    path: str, job_table: bool = False, chained: bool = False, worker: bool = False
) -> None:
    if job_table or chained or worker:
        raise SystemExit(f"{' '.join(POSTGRES_ONLY)} run on postgres only")
    connection = connect_sqlite(path)
    while not _stop:
        token = secrets.token_hex(16)
        connection.execute("BEGIN IMMEDIATE")
        row = connection.execute(CLAIM).fetchone()
        if row is not None:
            connection.execute(TAKE.replace("%s", "?"), (token, row[0]))
        connection.execute("COMMIT")
        if row is None:
            time.sleep(IDLE_POLL)
            continue
        stamp(row[1])
        connection.execute(SETTLE.replace("%s", "?"), (row[0], token))


def main() -> None:
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    runs = {"postgres": run_postgres, "mariadb": run_mariadb, "sqlite": run_sqlite}
    db, target, *flags = sys.argv[1:] if len(sys.argv) > 2 else ("", "")
    if db not in runs or not set(flags) <= set(POSTGRES_ONLY) or len(set(flags)) < len(flags):
        usage = " ".join(f"[{flag}]" for flag in POSTGRES_ONLY)
        raise SystemExit(
            f"usage: python -m bench.floor {'|'.join(runs)} TARGET {usage}, not {sys.argv[1:]}"
        )
    os.environ.setdefault("BENCH_STAMP_FILE", "/dev/null")
    run = runs[db]
    run(
        target,
        job_table="--job-table" in flags,
        chained="--chained" in flags,
        worker="--worker-statements" in flags,
    )


if __name__ == "__main__":
    main()
