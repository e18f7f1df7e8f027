"""What the statements of Django's connection cost between two readings, counted rather
than timed: figures a busy machine moves much less than it moves wall time.

Read in a driver process (bench.driver), around a block of calls on Django's connection:

- the client's CPU: this process's user + system time (``getrusage``);
- the server's CPU spent serving it: the on-CPU time of the server thread behind the
  connection, from ``/proc/<pid>/schedstat`` (nanoseconds). PostgreSQL: the connection's
  backend process (``pg_backend_pid()``). MariaDB runs one process with a thread per
  connection: the thread whose operating-system id ``information_schema.PROCESSLIST``'s
  ``TID`` gives for the connection (without ``performance_schema``, off by default), so no
  other thread's work can be taken for it. SQLite has no server: its work is the client's;
- on PostgreSQL, the WAL of this database's records: ``pg_waldump`` over the LSNs the block
  spanned, keeping the records that change a block of this database and the commits of
  their transactions (other databases' tenants write WAL at the same time, which the LSN
  difference counts too: that is ``wal_bytes_server``), with their full-page images, split
  by relation; read only where the server's ``pg_wal`` is readable here (else ``None``);
- on PostgreSQL, blocks found in the server's buffers and blocks read from outside them
  (``pg_stat_database``, this database's: flushed by ``pg_stat_force_next_flush()`` before
  each reading, so a reading holds every statement before it).
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The operating system's id of the MariaDB thread serving this connection (one thread per
#: connection, MariaDB's default ``thread_handling``).
MARIADB_THREAD = "SELECT TID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()"

FLUSH_STATS = "SELECT pg_stat_force_next_flush()"
POSITION = (
    "SELECT pg_current_wal_flush_lsn()::text, "
    "pg_wal_lsn_diff(pg_current_wal_flush_lsn(), '0/0'), blks_hit, blks_read "
    "FROM pg_stat_database WHERE datname = current_database()"
)
WAL_SOURCE = (
    "SELECT current_setting('data_directory'), oid, current_setting('server_version_num') "
    "FROM pg_database WHERE datname = current_database()"
)
#: Relations by the file their blocks are written to (``pg_waldump`` names files).
RELATIONS = "SELECT pg_relation_filenode(oid), relname FROM pg_class WHERE relfilenode <> 0"
#: One ``pg_waldump`` record: its rmgr, its length without and with its full-page images,
#: xid, and what follows ``desc:`` (its kind, then the blocks it changes).
WAL_RECORD = re.compile(
    r"^rmgr: (\S+)\s+len \(rec/tot\):\s*(\d+)/\s*(\d+), tx:\s*(\d+), lsn: \S+, prev \S+, "
    r"desc: (.*)$"
)
BLOCK = re.compile(r"blkref #\d+: rel (\d+)/(\d+)/(\d+)(?: fork \w+)? blk \d+( FPW)?")


def cpu_seconds() -> float:
    """This process's user + system seconds."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def on_cpu(schedstat: Path) -> float:
    """Seconds a process or thread has run, from its ``/proc/.../schedstat``."""
    return int(schedstat.read_text().split()[0]) / 1e9


def serving_schedstat(cursor: Any, vendor: str) -> Path:
    """The ``schedstat`` file of the server process or thread serving ``cursor``'s
    connection (PostgreSQL or MariaDB on this machine)."""
    if vendor == "postgresql":
        cursor.execute("SELECT pg_backend_pid()")
        return Path(f"/proc/{cursor.fetchone()[0]}/schedstat")
    cursor.execute("SELECT @@pid_file")
    server = Path(f"/proc/{int(Path(cursor.fetchone()[0]).read_text())}/task")
    cursor.execute(MARIADB_THREAD)
    serving = server / str(cursor.fetchone()[0]) / "schedstat"
    if not serving.exists():
        raise RuntimeError(f"no thread {serving.parent.name} in {server}: is the server local?")
    return serving


def connection_id(cursor: Any, vendor: str) -> int:
    cursor.execute(
        "SELECT pg_backend_pid()" if vendor == "postgresql" else "SELECT CONNECTION_ID()"
    )
    return int(cursor.fetchone()[0])


@dataclass(frozen=True, kw_only=True)
class Reading:
    """The counters at one moment. ``lsn``, ``wal``, ``blocks_*``: PostgreSQL only."""

    client: float
    server: float
    lsn: str = ""
    wal: float = 0.0
    blocks_hit: float = 0.0
    blocks_read: float = 0.0


@dataclass(kw_only=True)
class OwnWal:
    """This database's WAL records between two LSNs: total bytes (full-page images
    included), records, full-page images and their bytes, and the bytes of each relation
    changed."""

    bytes: int = 0
    records: int = 0
    fpi: int = 0
    fpi_bytes: int = 0
    by_relation: Counter[str] = field(default_factory=Counter)
    fpi_by_relation: Counter[str] = field(default_factory=Counter)


def own_wal(
    waldump: str, wal_dir: str, start: str, end: str, database: int, names: dict[int, str]
) -> OwnWal:
    """``pg_waldump`` from ``start`` to ``end``: the records that change a block of
    ``database`` and the commits of their transactions. A record with blocks of several
    relations is counted to the first; its images to each relation imaged."""
    dumped = subprocess.run(
        [waldump, "-p", wal_dir, "-s", start, "-e", end],
        capture_output=True,
        text=True,
        check=False,
    )
    ours, xids = OwnWal(), set()
    commits: dict[int, int] = {}
    for line in dumped.stdout.splitlines():
        found = WAL_RECORD.match(line)
        if found is None:
            continue
        rmgr, length, xid, desc = found[1], int(found[3]), int(found[4]), found[5]
        blocks = [b for b in BLOCK.finditer(desc) if int(b[2]) == database]
        if blocks:
            ours.bytes += length
            ours.fpi_bytes += length - int(found[2])
            ours.records += 1
            ours.by_relation[names.get(int(blocks[0][3]), blocks[0][3])] += length
            for block in blocks:
                if block[4]:
                    ours.fpi += 1
                    ours.fpi_by_relation[names.get(int(block[3]), block[3])] += 1
            if xid:
                xids.add(xid)
        elif rmgr == "Transaction" and desc.startswith("COMMIT"):
            commits[xid] = commits.get(xid, 0) + length
    for xid in xids & commits.keys():
        ours.bytes += commits[xid]
        ours.records += 1
        ours.by_relation["(commit)"] += commits[xid]
    if dumped.returncode != 0 and not ours.records:
        raise RuntimeError(f"pg_waldump failed: {dumped.stderr[-500:]}")
    return ours


class Costs:
    """Readings of what Django's connection cost, and their differences per call."""

    def __init__(self) -> None:
        from django.db import connection

        self.connection = connection
        self.vendor = connection.vendor
        self.serving: Path | None = None
        self.waldump: tuple[str, str, int] | None = None
        with connection.cursor() as cursor:
            if self.vendor in ("postgresql", "mysql"):
                self.serving = serving_schedstat(cursor, self.vendor)
            if self.vendor == "postgresql":
                cursor.execute(WAL_SOURCE)
                data_dir, database, version = cursor.fetchone()
                wal_dir = Path(data_dir) / "pg_wal"
                waldump = shutil.which("pg_waldump") or (
                    f"/usr/lib/postgresql/{int(version) // 10000}/bin/pg_waldump"
                )
                if os.access(wal_dir, os.R_OK | os.X_OK) and os.access(waldump, os.X_OK):
                    self.waldump = (waldump, str(wal_dir), int(database))

    def read(self) -> Reading:
        client = cpu_seconds()
        server = on_cpu(self.serving) if self.serving is not None else 0.0
        if self.vendor != "postgresql":
            return Reading(client=client, server=server)
        with self.connection.cursor() as cursor:
            cursor.execute(FLUSH_STATS)
        with self.connection.cursor() as cursor:  # flushed while idle between the two
            cursor.execute(POSITION)
            lsn, wal, hit, read = cursor.fetchone()
        return Reading(
            client=client,
            server=server,
            lsn=lsn,
            wal=float(wal),
            blocks_hit=float(hit),
            blocks_read=float(read),
        )

    def per_call(self, before: Reading, after: Reading, calls: int) -> dict[str, Any]:
        """Per call between the two readings: CPU in µs, and on PostgreSQL WAL bytes,
        records, full-page images and their bytes (this database's, ``None`` where ``pg_wal`` is not
        readable here; ``wal_bytes_server``: the whole server's) and blocks hit and read,
        with ``wal_by_relation`` (bytes) and ``fpi_by_relation`` per call."""
        client = (after.client - before.client) / calls * 1e6
        server = (after.server - before.server) / calls * 1e6
        found: dict[str, Any] = {
            "client_cpu_us": client,
            "server_cpu_us": server,
            "cpu_us": client + server,
        }
        if self.vendor != "postgresql":
            return found
        found.update(
            wal_bytes_server=(after.wal - before.wal) / calls,
            blocks_hit=(after.blocks_hit - before.blocks_hit) / calls,
            blocks_read=(after.blocks_read - before.blocks_read) / calls,
            blocks=(after.blocks_hit + after.blocks_read - before.blocks_hit - before.blocks_read)
            / calls,
            wal_bytes=None,
        )
        if self.waldump is not None:
            with self.connection.cursor() as cursor:
                cursor.execute(RELATIONS)
                names = {int(node): name for node, name in cursor.fetchall()}
            wal = own_wal(*self.waldump[:2], before.lsn, after.lsn, self.waldump[2], names)
            found.update(
                wal_bytes=wal.bytes / calls,
                wal_records=wal.records / calls,
                wal_fpi=wal.fpi / calls,
                wal_fpi_bytes=wal.fpi_bytes / calls,
                wal_by_relation={k: v / calls for k, v in wal.by_relation.most_common()},
                fpi_by_relation={k: v / calls for k, v in wal.fpi_by_relation.most_common()},
            )
        return found
