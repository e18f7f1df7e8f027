"""What the job table's row rules cost PostgreSQL per row a statement writes, counted.

PostgreSQL prepares a table's ``CHECK`` constraints again in every statement that writes
to it. This measures what that costs on copies of the job table (every index, 1,000 rows):
the fifteen rules as ``CHECK`` constraints (as before migration 0018), the one constraint
calling ``watchdog_job_broken_rule`` (since), and no rule at all. Each variant runs
``UPDATE … SET attempts = attempts + 1 WHERE id = $1`` as a prepared statement ``--rows``
times per chunk, ``--chunks`` chunks, the variants interleaved, first each chunk in one
transaction, then each ``UPDATE`` in autocommit (its own transaction, as a job of the
default worker is); the server backend's CPU is read from ``/proc/PID/schedstat``. It
prints the fastest and the median chunk per variant, in µs per ``UPDATE``.

``python -m bench.rule_costs [--chunks N] [--rows N]``, on a scratch database it drops and
re-creates (``BENCH_DB_SUFFIX`` keeps it apart). Run it on this machine's server: it reads
the backend's ``/proc`` entry.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
from pathlib import Path
from typing import Any

from bench.roundtrips import setup

DB_NAME = "watchdog_rule_costs"
ROWS_PER_TABLE = 1000
#: The copies: each variant's table, made from the migrated job table.
VARIANTS = {
    "the 15 CHECK constraints": "rules_as_checks",
    "one constraint calling watchdog_job_broken_rule": "rules_as_function",
    "none": "rules_none",
}
COPY = "CREATE TABLE {table} (LIKE watchdog_job INCLUDING DEFAULTS INCLUDING INDEXES)"
COPY_WITH_CONSTRAINTS = "CREATE TABLE {table} (LIKE watchdog_job INCLUDING ALL)"
FILL = """
INSERT INTO {table} (id, job_id, queue, lane, priority, state, recovery_count, ready,
                     enqueued_at, attempts, delayed, position)
SELECT i, 'j' || i, 'q' || i, 'default', 0, 'queued', 0, TRUE, now(), 0, FALSE, i
  FROM generate_series(1, %s) AS i
"""
UPDATE = "UPDATE {table} SET attempts = attempts + 1 WHERE id = %s"


def rules() -> Any:
    """Migration 0018's module: its rules, as PostgreSQL stored the ``CHECK``\\s."""
    return importlib.import_module("django_watchdog.migrations.0018_job_rules_one_function")


def make_tables(connection: Any) -> None:
    """The three copies, filled and vacuumed; the function's copy takes the migrated
    table's one constraint with it (``INCLUDING ALL``)."""
    with connection.cursor() as cursor:
        for table in VARIANTS.values():
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
        cursor.execute(COPY_WITH_CONSTRAINTS.format(table="rules_as_function"))
        cursor.execute(COPY.format(table="rules_as_checks"))
        for name, expression in rules().RULES:
            cursor.execute(
                f"ALTER TABLE rules_as_checks ADD CONSTRAINT r_{name} CHECK ({expression})"
            )
        cursor.execute(COPY.format(table="rules_none"))
        for table in VARIANTS.values():
            cursor.execute(FILL.format(table=table), [ROWS_PER_TABLE])
            cursor.execute(f"VACUUM ANALYZE {table}")


def measure(chunks: int, rows: int) -> dict[str, dict[str, list[float]]]:
    import psycopg
    from django.db import connection

    make_tables(connection)
    # Django's connection parameters bring a client-side binding cursor, which would send
    # each UPDATE as new text to parse and plan: only where to connect is taken.
    params = {
        key: value
        for key, value in connection.get_connection_params().items()
        if key in ("dbname", "user", "password", "host", "port")
    }
    with psycopg.connect(**params, autocommit=True) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        schedstat = Path(f"/proc/{pid}/schedstat")

        def server_ns() -> int:
            return int(schedstat.read_text().split()[0])

        results: dict[str, dict[str, list[float]]] = {}
        for mode in ("one transaction a chunk", "each UPDATE its own transaction"):
            per_variant: dict[str, list[float]] = {label: [] for label in VARIANTS}
            for _ in range(chunks):
                for label, table in VARIANTS.items():
                    statement = UPDATE.format(table=table)
                    before = server_ns()
                    if mode.startswith("one"):
                        with conn.transaction():
                            for n in range(rows):
                                conn.execute(statement, (n % ROWS_PER_TABLE + 1,), prepare=True)
                    else:
                        for n in range(rows):
                            conn.execute(statement, (n % ROWS_PER_TABLE + 1,), prepare=True)
                    per_variant[label].append((server_ns() - before) / rows / 1000)
                for table in VARIANTS.values():
                    conn.execute(f"VACUUM {table}")
            results[mode] = per_variant
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=11)
    parser.add_argument("--rows", type=int, default=2000, help="UPDATEs per chunk")
    options = parser.parse_args()
    os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"  # not a caller's (a test run's)
    setup("postgres", DB_NAME + os.environ.get("BENCH_DB_SUFFIX", ""))
    results = measure(options.chunks, options.rows)
    modes = list(results)
    print(
        "| the job table's rules | server CPU per one-row UPDATE, "
        + " | ".join(f"{mode} (µs; fastest, median)" for mode in modes)
        + " |"
    )
    print("|---|" + "---:|" * len(modes))
    for label in VARIANTS:
        cells = [
            f"{min(results[mode][label]):.0f}, {statistics.median(results[mode][label]):.0f}"
            for mode in modes
        ]
        print(f"| {label} | " + " | ".join(cells) + " |")
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    main()
