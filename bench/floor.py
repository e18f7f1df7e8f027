"""The floor: a raw loop doing only the minimal claim-and-settle statements per job.

Its own table (``bench_floor``), no framework. Per job:

    claim:  BEGIN; SELECT id, tag ... WHERE state = 'queued' ORDER BY id LIMIT 1
            FOR UPDATE SKIP LOCKED; UPDATE ... SET state = 'running', token = ...; COMMIT
    run:    stamp(tag)                      (the same no-op every system runs)
    settle: UPDATE ... SET state = 'done' WHERE id = ... AND token = ...; COMMIT

On SQLite the claim is ``BEGIN IMMEDIATE`` (the write lock) instead of ``SKIP LOCKED``.
Run as ``python -m bench.floor postgres|sqlite TARGET``; stops on SIGTERM.
"""

from __future__ import annotations

import os
import secrets
import signal
import sqlite3
import sys
import time

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
IDLE_POLL = 0.005
_stop = False


def _on_term(signum: int, frame: object) -> None:
    global _stop
    _stop = True


def connect_sqlite(path: str) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=20, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    return connection


def run_postgres(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn) as connection:
        while not _stop:
            token = secrets.token_hex(16)
            with connection.cursor() as cursor:
                cursor.execute(
                    f"SELECT id, tag FROM {TABLE} WHERE state = 'queued' ORDER BY id LIMIT 1 "
                    "FOR UPDATE SKIP LOCKED"
                )
                row = cursor.fetchone()
                if row is not None:
                    cursor.execute(
                        f"UPDATE {TABLE} SET state = 'running', token = %s WHERE id = %s",
                        (token, row[0]),
                    )
            connection.commit()
            if row is None:
                time.sleep(IDLE_POLL)
                continue
            stamp(row[1])
            with connection.cursor() as cursor:
                cursor.execute(
                    f"UPDATE {TABLE} SET state = 'done' WHERE id = %s AND token = %s",
                    (row[0], token),
                )
            connection.commit()


def run_sqlite(path: str) -> None:
    connection = connect_sqlite(path)
    while not _stop:
        token = secrets.token_hex(16)
        connection.execute("BEGIN IMMEDIATE")
        row = connection.execute(
            f"SELECT id, tag FROM {TABLE} WHERE state = 'queued' ORDER BY id LIMIT 1"
        ).fetchone()
        if row is not None:
            connection.execute(
                f"UPDATE {TABLE} SET state = 'running', token = ? WHERE id = ?", (token, row[0])
            )
        connection.execute("COMMIT")
        if row is None:
            time.sleep(IDLE_POLL)
            continue
        stamp(row[1])
        connection.execute(
            f"UPDATE {TABLE} SET state = 'done' WHERE id = ? AND token = ?", (row[0], token)
        )


def main() -> None:
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    db, target = sys.argv[1], sys.argv[2]
    os.environ.setdefault("BENCH_STAMP_FILE", "/dev/null")
    (run_postgres if db == "postgres" else run_sqlite)(target)


if __name__ == "__main__":
    main()
