"""PostgreSQL's time-driven changes and upkeep: delayed jobs coming due, the settled feed's
positions, idle task queues. Each skips rows another transaction holds rather than wait.

Part of ``PostgresDialect`` (``dialects.postgres``).
"""

from __future__ import annotations

from typing import Any

from . import common
from .base import Dialect, Params, Row
from .postgres_claims import NEXT_JOB_ID

is_set = Dialect.is_set
is_unset = Dialect.is_unset

# time-driven changes

#: Whether any delayed job is due (a read that locks nothing, before the transaction).
ANY_DUE = common.due_delayed(is_set)
NEXT_DUE = common.next_due(is_set)
#: The due jobs whose queues this transaction could lock now. A queue another transaction
#: holds is skipped and its jobs enter on a later pass; the ``LIMIT`` counts only jobs of
#: queues it locked. Waiting for no lock, this cannot deadlock with multi-queue changes.
DUE_DELAYED = """
SELECT j.id, j.queue FROM watchdog_job j JOIN watchdog_queue q ON q.name = j.queue
 WHERE j.delayed = TRUE AND j.run_after <= %(now)s
 ORDER BY j.run_after, j.id LIMIT %(limit)s
   FOR UPDATE OF q SKIP LOCKED
"""
POSITION = f"""
UPDATE watchdog_job SET delayed = FALSE, position = {NEXT_JOB_ID}
 WHERE id = %(id)s AND delayed
"""

# the settled feed

LOCK_CLOCK = "SELECT last_position FROM watchdog_feed_clock WHERE id = 1 FOR UPDATE"
#: Rows another transaction holds locked are left for the next reader: they get a later
#: position, which is still after everything a reader could have passed.
POSITION_ROWS = """
UPDATE watchdog_job
   SET feed_position = %(base)s + fresh.rank
  FROM (SELECT id, row_number() OVER (ORDER BY id) AS rank
          FROM (SELECT id FROM watchdog_job
                 WHERE feed_position IS NULL AND delayed = FALSE
                 ORDER BY id
                 LIMIT %(batch)s FOR UPDATE SKIP LOCKED) AS unpositioned) AS fresh
 WHERE watchdog_job.id = fresh.id
"""

# idle task queues

#: First, lock idle-looking task queue rows, skipping those another transaction holds (an
#: enqueue into that queue: left for a later pass).
LOCK_IDLE_QUEUES = f"""
SELECT q.name FROM watchdog_queue q
 WHERE {common.TASK_QUEUE} AND {common.names_no_job(is_set, is_unset)}
 ORDER BY q.name
 LIMIT %(limit)s
   FOR UPDATE OF q SKIP LOCKED
"""
#: Then delete the locked rows no job names, in a statement whose snapshot follows the locks.
DELETE_LOCKED_IDLE_QUEUES = f"""
DELETE FROM watchdog_queue q
 WHERE q.name = ANY(%(names)s::text[]) AND {common.names_no_job(is_set, is_unset)}
"""

#: Watchdog's tables whose rows' density the server does not know (``relpages`` is 0 until
#: a vacuum or an analyze finds the table holding rows: never analyzed, or last seen
#: empty), each with whether it holds ten pages: below that the planner assumes ten pages
#: of such a table, above it the rows it guesses from their declared widths (a tenth of
#: the queues there are, say) and no more.
UNANALYZED = """
SELECT c.relname::text, pg_relation_size(c.oid) >= 10 * current_setting('block_size')::bigint
  FROM pg_class c
 WHERE c.oid IN ('watchdog_job'::regclass, 'watchdog_queue'::regclass) AND c.relpages = 0
 ORDER BY c.relname
"""
#: Each table's ``ANALYZE``, by name (an identifier, so no parameter).
ANALYZE = {table: f"ANALYZE {table}" for table in ("watchdog_job", "watchdog_queue")}
#: Whether the server knows ``%(table)s``'s density now (an ``ANALYZE`` by a role that does
#: not own it warns and skips it).
ANALYZED = "SELECT relpages > 0 FROM pg_class WHERE oid = %(table)s::regclass"


class PostgresUpkeep(Dialect):
    """PostgreSQL's delayed jobs, feed positions and idle queues (a part of ``PostgresDialect``)."""

    ANY_DUE, NEXT_DUE = ANY_DUE, NEXT_DUE
    CREATE_CLOCK, ADVANCE_CLOCK = common.CREATE_CLOCK, common.ADVANCE_CLOCK
    ANY_UNPOSITIONED = common.any_unpositioned(is_unset)

    def due_delayed(self, at: Any, limit: int) -> list[Row]:
        self.bound_lock_waits()
        return self.fetch(DUE_DELAYED, {"now": at, "limit": limit})

    def enter_order(self, pk: int) -> int:
        return self.execute(POSITION, {"id": pk})

    def feed_clock(self) -> list[Row]:
        return self.fetch(LOCK_CLOCK)

    def position_rows(self, base: int, batch: int) -> int:
        return self.execute(POSITION_ROWS, {"base": base, "batch": batch})

    def forget_idle_queues(self, params: Params) -> int:
        locked = [name for (name,) in self.fetch(LOCK_IDLE_QUEUES, params)]
        if not locked:
            return 0
        return self.execute(DELETE_LOCKED_IDLE_QUEUES, {"names": locked})

    def unanalyzed_tables(self) -> list[tuple[str, bool]]:
        return [(str(table), bool(grown)) for table, grown in self.fetch(UNANALYZED)]

    def analyze(self, table: str) -> bool:
        with self.connection.cursor() as cursor:  # a utility statement: never prepared
            cursor.execute(ANALYZE[table])
        ((analyzed,),) = self.fetch(ANALYZED, {"table": table})
        return bool(analyzed)
