"""MariaDB (10.6+): every statement the store runs there, by name, beside the method that binds it.

Connections read committed rows at each statement (READ COMMITTED, set per connection with
``OPTIONS["isolation_level"] = "read committed"``; ``manage.py check`` refuses an alias
without it, since the API joins the caller's transaction, whose isolation cannot change once
it has begun). A change to a queue first locks its ``watchdog_queue`` row (in name order
when several); a read after that lock then sees what the lock's previous holder committed.

What MariaDB lacks, and what stands in for it (``docs/explanation/mariadb-dialect.md``):

- no ``UPDATE … RETURNING``: a fenced update, then the row read back by its job id (the
  queue's lock is held, so nothing changed it in between);
- no ``FOR UPDATE OF``: a claim reads candidates without locks, locks their queues with
  ``SKIP LOCKED``, then re-reads the jobs of the queues it holds (``mariadb_claim``);
- no ``NOTIFY``: idle workers probe the claim index (``WAKE = "probe"``);
- no id sequence behind ``AUTO_INCREMENT``: a sequence of its own (``NEXT_ID``, migration
  0011) gives job ids and promoted jobs' places, as PostgreSQL's id sequence does;
- no ``lock_timeout``: a lock-taking statement of a bounded block runs under
  ``SET STATEMENT max_statement_time`` (error 1969, treated as 1205 is: ``waits``);
- ``delayed`` is a reserved word: every statement writes it `` `delayed` ``;
- the clock is ``UTC_TIMESTAMP(6)``: ``NOW(6)`` follows the session's time zone;
- a deadlock rolls back the victim's whole transaction (1213): the store runs its own
  again (``deadlock_victim``, ``store.deadlocks``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from . import common, mariadb_claim, mariadb_enqueue, shown_queues
from .base import Dialect, LaneTerms, Params, QuietLanes, Row, in_clause
from .mariadb_terms import (
    DEADLOCK,
    NEXT_ID,
    NOW,
    QUEUE_NAME,
    bounded,
    error_code,
    from_json,
    in_id_order,
    is_set,
    is_unset,
    job_columns,
    one_name_rows,
    without_returning,
)

if TYPE_CHECKING:
    from ..enqueue import NewJob

# locks

LOCK_QUEUE = "SELECT name FROM watchdog_queue WHERE name = %(queue)s FOR UPDATE"
#: The job's queue, locked; the subquery is a plain read (it locks nothing).
LOCK_QUEUE_OF_JOB = """
SELECT q.name FROM watchdog_queue q
 WHERE q.name = (SELECT j.queue FROM watchdog_job j WHERE j.job_id = %(job_id)s)
   FOR UPDATE
"""


#: Lock the queues named in ``%(names)s`` (``one_name_rows``, in name order) that exist:
#: read, and so locked, in the document's order (``STRAIGHT_JOIN``: a probe of the queue
#: table's key per name), the name order every change of several queues locks them in.
#: One parameter whatever their number: an ``IN`` list of 2,000 names cost the client
#: more to quote than the server's lock.
HOLD_QUEUES = f"""
SELECT q.name FROM {from_json("%(names)s", [("name", QUEUE_NAME)])}
  STRAIGHT_JOIN watchdog_queue q ON q.name = j.name
   FOR UPDATE
"""


@lru_cache(maxsize=128)
def queues_of_jobs(job_ids: str) -> str:
    """The distinct queues of the jobs ``job_ids`` (an ``IN`` clause); a plain read."""
    return f"SELECT DISTINCT queue FROM watchdog_job WHERE {job_ids}"


# settle

SETTLE = without_returning(common.settle(NOW))
RETRY = without_returning(common.retry(NOW))
PRIOR = common.PRIOR
JOB_BY_JOB_ID = f"SELECT {job_columns()} FROM watchdog_job WHERE job_id = %(job_id)s"


@lru_cache(maxsize=128)
def jobs_by_job_id(job_ids: str) -> str:
    return f"SELECT {job_columns()} FROM watchdog_job WHERE {job_ids}"


# queue heads

HEAD = in_id_order(common.head(is_unset))
MARK_READY = "UPDATE watchdog_job SET ready = TRUE WHERE id = %(id)s AND ready = FALSE"
#: The head ``%(id)s`` displaced (by entering the order ahead of it) loses its ready flag.
DEMOTE = mariadb_enqueue.demote("%(id)s")

#: The queues a page shows: the names of ``%(queues)s`` (a JSON array), compared byte for
#: byte as the job table's queue column is (``utf8mb4_nopad_bin``, migration 0009).
SHOWN = (
    "SELECT queue FROM JSON_TABLE(%(queues)s, '$[*]' COLUMNS ("
    "queue VARCHAR(256) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin PATH '$')) AS names"
)
#: The head of each of ``%(queues)s`` in one statement whatever their number (no
#: ``LATERAL`` here: three index probes per name, ``shown_queues.heads``).
HEADS_OF_QUEUES = in_id_order(shown_queues.heads(is_unset, SHOWN))


@lru_cache(maxsize=4)
def capped_counts(cap: int) -> str:
    """Per queue of ``%(queues)s`` and state, its jobs counted up to ``cap`` per part, in
    one statement whatever the number of queues (``shown_queues.probed_capped_counts``)."""
    return shown_queues.probed_capped_counts(is_set, is_unset, SHOWN, cap)


# time-driven changes

ANY_DUE = common.due_delayed(is_set)
NEXT_DUE = common.next_due(is_set)
#: The due jobs whose queues this transaction could lock now (a locking read over a join
#: locks the rows of both tables: the jobs it returns are about to change anyway).
DUE_DELAYED = """
SELECT j.id, j.queue FROM watchdog_job j JOIN watchdog_queue q ON q.name = j.queue
 WHERE j.`delayed` = TRUE AND j.run_after <= %(now)s
 ORDER BY j.run_after, j.id LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED
"""
#: A due job joins its queue's order: its place is drawn from the job id sequence, as
#: enqueued jobs' are (``NEXT_ID``), so it comes after every job enqueued or promoted before.
POSITION = (
    f"UPDATE watchdog_job SET `delayed` = FALSE, position = {NEXT_ID}"
    " WHERE id = %(id)s AND `delayed` = TRUE"
)

# the settled feed

CREATE_CLOCK = (
    "INSERT INTO watchdog_feed_clock (id, last_position) VALUES (1, 0)"
    " ON DUPLICATE KEY UPDATE id = id"
)
LOCK_CLOCK = "SELECT last_position FROM watchdog_feed_clock WHERE id = 1 FOR UPDATE"
#: Rows another transaction holds (an uncommitted enqueue's) are skipped: they get a later
#: position, after everything a reader could have passed. A statement of its own: as the
#: derived table of an ``UPDATE`` it would wait for them.
UNPOSITIONED = """
SELECT id FROM watchdog_job
 WHERE feed_position IS NULL AND `delayed` = FALSE
 ORDER BY id
 LIMIT %(batch)s
   FOR UPDATE SKIP LOCKED
"""


@lru_cache(maxsize=16)
def position_rows(count: int) -> str:
    """Number the rows ``%(id_0)s``… (ascending ids this transaction locked) after
    ``%(base)s``, in id order: ``FIELD`` is an id's rank in the list. One table, by primary
    key, so it waits for no lock (a join reading ``watchdog_job`` again deadlocked with
    settles under load)."""
    ids = ", ".join(f"%(id_{n})s" for n in range(count))
    return f"""
UPDATE watchdog_job SET feed_position = %(base)s + FIELD(id, {ids})
 WHERE id IN ({ids})
"""


@lru_cache(maxsize=64)
def settled_jobs(lanes: str) -> str:
    """``common.settled_jobs`` for MariaDB: the horizon is one dive into the generated
    ``feed_pending_position`` (the feed position of a pending job, NULL otherwise)."""
    return f"""
SELECT {job_columns()} FROM watchdog_job
 WHERE state = 'settled' AND feed_position IS NOT NULL AND feed_position > %(after)s {lanes}
   AND feed_position < COALESCE(
       (SELECT MIN(feed_pending_position) FROM watchdog_job
         WHERE feed_pending_position IS NOT NULL {lanes}),
       %(no_horizon)s)
 ORDER BY feed_position
 LIMIT %(limit)s
"""


# idle task queues

LOCK_IDLE_QUEUES = f"""
SELECT q.name FROM watchdog_queue q
 WHERE {common.TASK_QUEUE} AND {common.names_no_job(is_set, is_unset)}
 ORDER BY q.name
 LIMIT %(limit)s
   FOR UPDATE SKIP LOCKED
"""


@lru_cache(maxsize=64)
def delete_locked_idle_queues(names: str) -> str:
    no_job = common.names_no_job(is_set, is_unset)
    return f"DELETE q FROM watchdog_queue q WHERE {names} AND {no_job}"


# tables built from the models

#: Where migration 0011's sequence starts: above every id and position stored.
ID_SEQUENCE_START = """
SELECT GREATEST(COALESCE(MAX(id), 0), COALESCE(MAX(position), 0)) + 1 FROM watchdog_job
"""
#: Migration 0011's sequence (``NEXT_ID``), unless it exists.
CREATE_ID_SEQUENCE = "CREATE SEQUENCE IF NOT EXISTS watchdog_job_id_seq START WITH %(start)s"

# worker sessions

HEARTBEAT = common.heartbeat(NOW)

#: The optimizer's plan for an ORM query, one row per table it reads (``rows``: its estimate).
EXPLAIN = "EXPLAIN "

#: The server ends a transaction its worker left idle this many seconds (whole seconds).
IDLE_TRANSACTION_TIMEOUT = "SET SESSION idle_transaction_timeout = %(seconds)s"


class MariadbDialect(Dialect):
    vendor = "mysql"
    NOW = NOW
    WAKE = "probe"
    is_set = staticmethod(is_set)
    is_unset = staticmethod(is_unset)

    SETTLE, RETRY, PRIOR, HEAD = SETTLE, RETRY, PRIOR, HEAD
    HEARTBEAT = HEARTBEAT
    ANY_DUE, NEXT_DUE = ANY_DUE, NEXT_DUE
    CREATE_CLOCK, ADVANCE_CLOCK = CREATE_CLOCK, common.ADVANCE_CLOCK
    ANY_UNPOSITIONED = common.any_unpositioned(is_unset)

    def fast_path(self) -> bool:
        """Django's cursor always: it turns MariaDB's check-constraint errors (4025) into
        ``IntegrityError`` as the ORM's do."""
        return False

    # locks

    def deadlock_victim(self, error: BaseException) -> bool:
        """Error 1213: InnoDB rolled the whole transaction back to end a deadlock."""
        return error_code(error) == DEADLOCK

    def bound_lock_waits(self) -> None:
        """Nothing to set for the transaction (MariaDB's lock wait timeout takes whole
        seconds): each lock-taking statement of the dialect is bounded itself."""

    def heartbeat(self, worker_id: str) -> bool:
        """``HEARTBEAT``, bounded itself in a bounded block (as every lock-taking statement)."""
        statement, bound = bounded(HEARTBEAT)
        return self.execute(statement, {"worker_id": worker_id, **bound}) > 0

    def row_estimate(self, sql: str, params: Sequence[Any]) -> int | None:
        """``EXPLAIN``'s estimate of the rows an ORM query reads from its first table (its
        own ``%s`` parameters, on Django's cursor as the ORM runs it): index dives and the
        table's statistics, as cheap on ten million rows as on ten."""
        with self.connection.cursor() as cursor:
            cursor.execute(EXPLAIN + sql, params)
            columns = [column[0] for column in cursor.description]
            first = cursor.fetchone()
        rows = first[columns.index("rows")] if first else None
        return None if rows is None else explained_rows(rows)

    def locking(self, sql: str, params: Params) -> list[Row]:
        """Run a lock-taking statement, bounded in a bounded block."""
        statement, bound = bounded(sql)
        return self.fetch(statement, {**params, **bound})

    def fetch_block(self, sql: str, params: Params) -> list[Row]:
        """Run an anonymous block (``BEGIN NOT ATOMIC … END``): the rows of the one result
        set it sends, if any. Its own status is read too, so an error the block raises
        after those rows surfaces here and the connection is left ready for the next."""
        rows: list[Row] = self.run(sql, params, _rows_then_status)
        return rows

    def lock_queue(self, queue: str) -> None:
        self.locking(LOCK_QUEUE, {"queue": queue})

    def lock_queues(self, queues: Sequence[str]) -> None:
        """Lock several queues in name order, so two multi-queue changes cannot deadlock."""
        if queues:
            self.hold_queues(queues)

    def hold_queues(self, queues: Sequence[str]) -> set[str]:
        """``lock_queues``: the names of those that exist (now locked)."""
        names = one_name_rows(sorted(set(queues)))
        return {name for (name,) in self.locking(HOLD_QUEUES, {"names": names})}

    def lock_queues_of_jobs(self, job_ids: Sequence[str]) -> None:
        if job_ids:
            clause, params = in_clause("job_id", "job_id", sorted(set(job_ids)))
            self.lock_queues([queue for (queue,) in self.fetch(queues_of_jobs(clause), params)])

    def lock_queue_of(self, job_id: str) -> str | None:
        rows = self.locking(LOCK_QUEUE_OF_JOB, {"job_id": job_id})
        return str(rows[0][0]) if rows else None

    def heads_statement(self, queues: Sequence[str]) -> tuple[str, Params]:
        return HEADS_OF_QUEUES, {"queues": json.dumps(list(queues))}

    def capped_counts_statement(self, queues: Sequence[str], cap: int) -> tuple[str, Params]:
        return capped_counts(cap), {"queues": json.dumps(list(queues))}

    def notify(self, lane: str) -> None:
        """No NOTIFY: idle workers probe for ready jobs (``WAKE``)."""

    # claim and settle

    def claim_sql(self, lanes: LaneTerms, limit: int) -> str:
        """The claim's first statement, a plain read of the claim index (what the index
        test EXPLAINs; it binds ``%(limit)s``); ``claim`` runs it and the three that
        follow."""
        return mariadb_claim.candidates(lanes.predicate())

    def claim(self, lanes: LaneTerms, params: Params) -> list[Row]:
        return mariadb_claim.claim(self, lanes.predicate(), params)

    def probe_sql(self, lanes: LaneTerms) -> str:
        return mariadb_claim.probe(lanes.predicate())

    def retry(self, params: Params) -> list[Row]:
        if not self.execute(RETRY, params):
            return []
        return self.fetch(JOB_BY_JOB_ID, {"job_id": params["job_id"]})

    def settle_and_refresh(
        self, params: Params, queue: str, quiet: QuietLanes
    ) -> tuple[Row, Row | None] | None:
        """Settle (fenced), read the row back, and make the queue's next head ready."""
        if not self.execute(SETTLE, params):
            return None
        (row,) = self.fetch(JOB_BY_JOB_ID, {"job_id": params["job_id"]})
        return row, self.refresh_head(queue)

    def refresh_head(self, queue: str, entered: Sequence[int] = ()) -> Row | None:
        """The queue's head row, made ready; a head it displaced (one of ``entered`` took
        its place) loses its ready flag."""
        return self.refresh_head_in_steps(queue, entered, DEMOTE, MARK_READY)

    def settle_many(self, rows: Sequence[tuple[Any, ...]], quiet: QuietLanes) -> list[Row]:
        """Settle each (job_id, token, outcome, reason, result, traceback), fenced, one
        update each; read the settled rows back; ready each queue's next head."""
        settled = [
            job_id
            for job_id, token, outcome, reason, result, traceback in rows
            if self.execute(
                SETTLE,
                {
                    "job_id": job_id,
                    "claim_token": token,
                    "outcome": outcome,
                    "reason": reason,
                    "result": result,
                    "traceback": traceback,
                },
            )
        ]
        if not settled:
            return []
        clause, params = in_clause("job_id", "job_id", settled)
        found = self.fetch(jobs_by_job_id(clause), params)
        queue = common.JOB_COLUMNS.index("queue")
        for name in sorted({row[queue] for row in found}):
            self.refresh_head(name)
        return found

    # enqueue

    def enter_jobs(
        self, batch: Sequence[NewJob], delays: Sequence[bool], now: datetime
    ) -> tuple[list[Row], set[str], dict[int, bool]]:
        return mariadb_enqueue.enter_jobs(self, batch, delays, now)

    def enter_job_alone(self, new: NewJob, delayed: bool, now: datetime) -> list[Row] | None:
        """One statement, one exchange: ``mariadb_enqueue.ENTER_JOB_ALONE``."""
        return mariadb_enqueue.enter_job_alone(self, new, delayed, now)

    # time-driven changes

    def due_delayed(self, at: Any, limit: int) -> list[Row]:
        return self.locking(DUE_DELAYED, {"now": at, "limit": limit})

    def enter_order(self, pk: int) -> int:
        """Give a due delayed job the next place in its queue's order."""
        return self.execute(POSITION, {"id": pk})

    # the settled feed

    def settled_jobs_sql(self, lanes: str) -> str:
        return settled_jobs(lanes)

    def feed_clock(self) -> list[Row]:
        return self.fetch(LOCK_CLOCK)

    def position_rows(self, base: int, batch: int) -> int:
        """Lock the unpositioned rows no one else holds, then number them."""
        ids = [pk for (pk,) in self.fetch(UNPOSITIONED, {"batch": batch})]
        if not ids:
            return 0
        params = {f"id_{n}": pk for n, pk in enumerate(ids)}
        return self.execute(position_rows(len(ids)), {**params, "base": base})

    # idle task queues

    def forget_idle_queues(self, params: Params) -> int:
        locked = [name for (name,) in self.locking(LOCK_IDLE_QUEUES, params)]
        if not locked:
            return 0
        clause, names = in_clause("q.name", "name", locked)
        return self.execute(delete_locked_idle_queues(clause), names)

    # tables built from the models

    def build_unmigrated(self) -> None:
        """The job id sequence (``NEXT_ID``), which the models cannot declare."""
        (start,) = self.fetch(ID_SEQUENCE_START)[0]
        self.execute(CREATE_ID_SEQUENCE, {"start": int(start)})

    # worker sessions

    def configure_session(self, values: Sequence[tuple[str, str]]) -> None:
        """Of the worker session settings (``store.sessions``), MariaDB has the idle
        transaction timeout, in whole seconds; TCP keepalives are the server's own."""
        for parameter, value in values:
            if parameter == "idle_in_transaction_session_timeout":
                seconds = max(1, -(-int(value) // 1000))
                self.execute(IDLE_TRANSACTION_TIMEOUT, {"seconds": seconds})


def _rows_then_status(cursor: Any) -> list[Row]:
    rows = list(cursor.fetchall()) if cursor.description else []
    while cursor.nextset():
        if cursor.description:
            rows.extend(cursor.fetchall())
    return rows


def explained_rows(value: object) -> int:
    """The rows ``EXPLAIN``'s ``rows`` column estimates: a number, or with a rowid filter
    the rows the access reads and the filter's share of them (``"98 (2%)"``), of which the
    first is kept: an upper bound of what the query matches."""
    return int(str(value).split(maxsplit=1)[0])
