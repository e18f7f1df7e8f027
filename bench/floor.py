"""The floor: a raw loop doing only the minimal claim-and-settle statements per job.

Its own table (``bench_floor``), no framework. Per job:

    claim:  BEGIN; SELECT id, tag ... WHERE state = 'queued' ORDER BY id LIMIT 1
            FOR UPDATE SKIP LOCKED; UPDATE ... SET state = 'running', token = ...; COMMIT
    run:    stamp(tag)                      (the same no-op every system runs)
    settle: UPDATE ... SET state = 'done' WHERE id = ... AND token = ...; COMMIT

On SQLite the claim is ``BEGIN IMMEDIATE`` (the write lock) instead of ``SKIP LOCKED``.
On MariaDB the statements are PostgreSQL's, at READ COMMITTED (as watchdog's connections),
with an index on (state, id) for the partial index MariaDB does not have.
Run as ``python -m bench.floor postgres|mariadb|sqlite TARGET``; stops on SIGTERM.
"""

from __future__ import annotations

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


def run_locking(connection: Any) -> None:
    """The claim-run-settle loop on a DB-API connection whose server has SKIP LOCKED."""
    while not _stop:
        token = secrets.token_hex(16)
        with connection.cursor() as cursor:
            cursor.execute(CLAIM + SKIP_LOCKED)
            row = cursor.fetchone()
            if row is not None:
                cursor.execute(TAKE, (token, row[0]))
        connection.commit()
        if row is None:
            time.sleep(IDLE_POLL)
            continue
        stamp(row[1])
        with connection.cursor() as cursor:
            cursor.execute(SETTLE, (row[0], token))
        connection.commit()


def run_postgres(dsn: str) -> None:
    import psycopg

    with psycopg.connect(dsn) as connection:
        run_locking(connection)


def run_mariadb(url: str) -> None:
    run_locking(connect_mariadb(url))


def run_sqlite(path: str) -> None:
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
    db, target = sys.argv[1], sys.argv[2]
    os.environ.setdefault("BENCH_STAMP_FILE", "/dev/null")
    {"postgres": run_postgres, "mariadb": run_mariadb, "sqlite": run_sqlite}[db](target)


if __name__ == "__main__":
    main()
