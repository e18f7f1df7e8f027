"""SQLite: every statement the store runs there, by name, beside the method that binds it.

One writer at a time: a write transaction (``BEGIN IMMEDIATE``) already excludes every other
writer, so nothing is locked row by row and every read inside it is current. SQLite uses a
partial index only if the query repeats its predicate term for term, and Django writes a
boolean term as ``x`` (5.2) or ``x = 1`` (6.x): ``is_set`` states both.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from itertools import batched, chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from . import common, shown_queues
from .base import Dialect, LaneTerms, Params, QuietLanes, Row
from .new_heads import best_new_jobs

if TYPE_CHECKING:
    from ..enqueue import NewJob

NOW = "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now')"


def is_set(column: str) -> str:
    return f"({column} AND {column} = 1)"


def is_unset(column: str) -> str:
    return f"(NOT {column} AND {column} = 0)"


#: Rows per multi-row statement: a statement repeated with the same text is prepared once,
#: so short ones win (SQLite 3.40: 2,000 rows took 7.3 ms as 20 statements of 100 and
#: 9.6 ms as 2 of 1,000).
ROWS_PER_STATEMENT = 100


def values(names: Sequence[str], count: int, *, grouped: bool = True) -> str:
    """Placeholders for ``count`` rows of ``names`` (row ``n``'s named ``<name>_<n>``):
    ``(…), (…)``, or without the parentheses for one-column lists (``grouped=False``)."""
    rows = (", ".join(f"%({name}_{n})s" for name in names) for n in range(count))
    return ", ".join(f"({row})" if grouped else row for row in rows)


@lru_cache(maxsize=64)
def claim(lanes: str) -> str:
    """Take the best ready jobs in one statement (the write transaction already excludes
    other claimers): picked through the claim index, numbered after the ``LIMIT``."""
    candidates = f"({common.candidates(is_set, lanes)}) AS candidate"
    return f"""
UPDATE watchdog_job AS taken SET {common.claim_set(NOW)}
  FROM ({common.picked(candidates)}) AS picked
 WHERE taken.id = picked.id AND taken.state = 'queued'
RETURNING {common.job_columns()}
"""


SETTLE = common.settle(NOW)
RETRY = common.retry(NOW)
PRIOR = common.PRIOR
QUEUE_OF_JOB = "SELECT queue FROM watchdog_job WHERE job_id = %(job_id)s"
HEARTBEAT = common.heartbeat(NOW)

# queue heads

HEAD = common.head(is_unset)
#: The queues a page shows: the names of ``%(queues)s`` (a JSON array).
SHOWN = "SELECT value AS queue FROM json_each(%(queues)s)"
#: The head of each of ``%(queues)s`` in one statement whatever their number (no
#: ``LATERAL`` here: three index probes per name, ``shown_queues.heads``).
HEADS_OF_QUEUES = shown_queues.heads(is_unset, SHOWN)


@lru_cache(maxsize=4)
def capped_counts(cap: int) -> str:
    """Per queue of ``%(queues)s`` and state, its jobs counted up to ``cap`` per part, in
    one statement whatever the number of queues (``shown_queues.exact_capped_counts``)."""
    return shown_queues.exact_capped_counts(is_set, is_unset, SHOWN, cap)


MARK_READY = "UPDATE watchdog_job SET ready = TRUE WHERE id = %(id)s AND NOT ready"
#: The head ``%(id)s`` displaced (by entering the order ahead of it) loses its ready flag.
DEMOTE = f"""
UPDATE watchdog_job SET ready = FALSE
 WHERE queue = %(queue)s AND {is_set("ready")} AND cancellation_id IS NULL AND id <> %(id)s
"""

# enqueue

#: ``RETURNING`` yields only the rows inserted, so the queues created here.
CREATE_QUEUES_ROW = ("name", "created_at")


@lru_cache(maxsize=128)
def create_queues(count: int) -> str:
    return (
        f"INSERT INTO watchdog_queue (name, created_at) VALUES {values(CREATE_QUEUES_ROW, count)}"
        " ON CONFLICT (name) DO NOTHING RETURNING name"
    )


#: ``enqueued_at`` as text: an expression has no declared type, so sqlite3 hands it back
#: as it is, where for the column it would call Django's ``datetime`` converter on each
#: row. The rows of a statement share their stamp (``'now'`` holds through one
#: ``sqlite3_step()``, and a statement with ``RETURNING`` makes all its changes in its
#: first), and the caller decodes each distinct text once (``written.Written``).
STAMP_AS_TEXT = "CAST(enqueued_at AS TEXT)"

#: Ids follow the last one AUTOINCREMENT gave (read in the statement), in the order of the
#: rows' ``ordinal`` (their index in the batch, ``first_row`` the statement's first), so a
#: position is its job's id as on PostgreSQL. (Numbered by ``row_number()`` instead, the
#: window's sort cost SQLite an eighth of the statement.) ``ready`` comes
#: decided for the jobs of queues created by this call; ``REFRESH_HEADS`` settles the
#: others. (``WHERE TRUE`` parses the upsert clause as such after a ``SELECT``.)
INSERT_JOBS_ROW = (
    "ordinal", "job_id", "queue", "lane", "priority", "payload", "max_recoveries", "delayed",
    "run_after", "retry_policy", "timeout", "trace_context", "ready",
)  # fmt: skip


@lru_cache(maxsize=128)
def insert_jobs(count: int) -> str:
    return f"""
INSERT INTO watchdog_job
    (id, position, job_id, queue, lane, priority, payload, max_recoveries, delayed, run_after,
     retry_policy, timeout, trace_context, ready, state, recovery_count, attempts, enqueued_at)
SELECT last.id + v.n, CASE WHEN v.column8 THEN NULL ELSE last.id + v.n END,
       v.column2, v.column3, v.column4, v.column5, v.column6, v.column7, v.column8,
       v.column9, v.column10, v.column11, v.column12, v.column13, 'queued', 0, 0, {NOW}
  FROM (SELECT column1 - %(first_row)s + 1 AS n, *
          FROM (VALUES {values(INSERT_JOBS_ROW, count)})) AS v,
       (SELECT COALESCE(MAX(seq), 0) AS id FROM sqlite_sequence
         WHERE name = 'watchdog_job') AS last
 WHERE TRUE
 ORDER BY v.n
ON CONFLICT (job_id) DO NOTHING
RETURNING id, job_id, {STAMP_AS_TEXT}, ready
"""


#: One job, its ``ready`` flag decided as it goes in (``insert_jobs`` for one row, and
#: no ``REFRESH_HEADS`` after it): in a queue the call created (``%(created)s``) it is the
#: head; in one that existed it is, by the queue-head rule, unless a job of the queue runs,
#: waits to retry, or is queued at least as high (older jobs win ties, and every job there
#: is older). Each probe matches a partial index's predicate: ``one_running_per_queue``,
#: ``retrying``, ``head``. A delayed job is not in the order: never ready.
INSERT_JOB = f"""
INSERT INTO watchdog_job
    (id, position, job_id, queue, lane, priority, payload, max_recoveries, delayed, run_after,
     retry_policy, timeout, trace_context, ready, state, recovery_count, attempts, enqueued_at)
SELECT last.id + 1, CASE WHEN %(delayed)s THEN NULL ELSE last.id + 1 END,
       %(job_id)s, %(queue)s, %(lane)s, %(priority)s, %(payload)s, %(max_recoveries)s,
       %(delayed)s, %(run_after)s, %(retry_policy)s, %(timeout)s, %(trace_context)s,
       CASE WHEN %(delayed)s THEN FALSE WHEN %(created)s THEN TRUE ELSE
            NOT EXISTS (SELECT 1 FROM watchdog_job r
                         WHERE r.queue = %(queue)s AND r.state = 'running')
        AND NOT EXISTS (SELECT 1 FROM watchdog_job r
                         WHERE r.queue = %(queue)s AND r.state = 'queued'
                           AND r.retry_at IS NOT NULL)
        AND NOT EXISTS (SELECT 1 FROM watchdog_job b
                         WHERE b.queue = %(queue)s AND b.state = 'queued'
                           AND {is_unset("b.delayed")} AND b.priority >= %(priority)s)
       END,
       'queued', 0, 0, {NOW}
  FROM (SELECT COALESCE(MAX(seq), 0) AS id FROM sqlite_sequence
         WHERE name = 'watchdog_job') AS last
 WHERE TRUE
ON CONFLICT (job_id) DO NOTHING
RETURNING id, job_id, {STAMP_AS_TEXT}, ready
"""

QUEUE_ROW = ("queue",)


#: The ``ready`` flag of every current head and every new job (id ``>= %(first_id)s``) of
#: the given queues, from the queue-head rule.
@lru_cache(maxsize=128)
def refresh_heads(count: int) -> str:
    return f"""
UPDATE watchdog_job AS w SET ready = CASE WHEN w.id = (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM watchdog_job r
                              WHERE r.queue = w.queue AND r.state = 'running') THEN NULL
           ELSE {common.next_head(is_unset, "w.queue")}
           END) THEN 1 ELSE 0 END
 WHERE w.queue IN ({values(QUEUE_ROW, count, grouped=False)})
   AND w.state = 'queued' AND w.cancellation_id IS NULL
   AND ({is_set("w.ready")} OR w.id >= %(first_id)s)
RETURNING id, ready
"""


# a batching worker's step

SETTLE_MANY_ROW = ("job_id", "token", "outcome", "reason", "result", "traceback")


@lru_cache(maxsize=128)
def settle_many(count: int) -> str:
    return f"""
WITH i(job_id, token, outcome, reason, result, traceback) AS (
    VALUES {values(SETTLE_MANY_ROW, count)})
UPDATE watchdog_job AS j SET {common.settle_set(NOW)}
  FROM i
 WHERE j.job_id = i.job_id AND j.state = 'running' AND j.claim_token = i.token
RETURNING {common.job_columns()}
"""


#: The next head of each given queue becomes ready, unless a job of the queue still runs.
@lru_cache(maxsize=128)
def ready_next_heads(count: int) -> str:
    return f"""
UPDATE watchdog_job SET ready = TRUE
 WHERE {is_unset("ready")} AND id IN (
    SELECT {common.next_head(is_unset, "q.name")}
      FROM watchdog_queue q
     WHERE q.name IN ({values(QUEUE_ROW, count, grouped=False)})
       AND NOT EXISTS (SELECT 1 FROM watchdog_job x
                        WHERE x.queue = q.name AND x.state = 'running'))
"""


# time-driven changes

DUE_DELAYED = common.due_delayed(is_set)
ANY_DUE = DUE_DELAYED
NEXT_DUE = common.next_due(is_set)
NEXT_ID = "UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'watchdog_job' RETURNING seq"
POSITION = (
    "UPDATE watchdog_job SET delayed = FALSE, position = %(position)s WHERE id = %(id)s AND delayed"
)

# the settled feed

READ_CLOCK = "SELECT last_position FROM watchdog_feed_clock WHERE id = 1"
POSITION_ROWS = f"""
UPDATE watchdog_job
   SET feed_position = %(base)s + fresh.rank
  FROM (SELECT id, row_number() OVER (ORDER BY id) AS rank
          FROM (SELECT id FROM watchdog_job
                 WHERE feed_position IS NULL AND {is_unset("delayed")}
                 ORDER BY id
                 LIMIT %(batch)s) AS unpositioned) AS fresh
 WHERE watchdog_job.id = fresh.id
"""

# idle task queues

#: One statement: the write transaction excludes every other writer.
DELETE_IDLE_QUEUES = f"""
DELETE FROM watchdog_queue WHERE name IN (
    SELECT q.name FROM watchdog_queue q
     WHERE {common.TASK_QUEUE} AND {common.names_no_job(is_set, is_unset)}
     ORDER BY q.name
     LIMIT %(limit)s)
"""

# the write lock

#: A write transaction of the store's own, on a connection in autocommit
#: (``enter_job_alone``): it takes the write lock first, as ``transaction_mode =
#: 'IMMEDIATE'`` makes Django's transactions do.
BEGIN_WRITE = "BEGIN IMMEDIATE"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"

#: The longest SQLite's busy handler (the default one, which ``OPTIONS["timeout"]`` sets)
#: sleeps between two tries for the write lock: a gap this long lets every writer waiting
#: for the lock try once.
BUSY_HANDLER_LONGEST_SLEEP = 0.1

# wake-up

#: Changes whenever another connection commits: a cheap poll for new work.
DATA_VERSION = "PRAGMA data_version"

_PYFORMAT = re.compile(r"%\((\w+)\)s")


@lru_cache(maxsize=1024)
def positional_style(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` with a ``?`` for each ``%(name)s``, and the names in the order they stand
    (a name used twice is bound twice).

    Not sqlite3's named style (``:name``): SQLite finds each named parameter's name by a
    walk of the statement's list of names, so binding a statement of ``n`` names costs
    ``n`` squared. A multi-row ``INSERT`` of 100 jobs (1,300 names) bound in 2.4 ms by
    name and in 0.06 ms by position (SQLite 3.40).
    """
    names: list[str] = []

    def placeholder(match: re.Match[str]) -> str:
        names.append(match.group(1))
        return "?"

    return _PYFORMAT.sub(placeholder, sql).replace("%%", "%"), tuple(names)


@lru_cache(maxsize=1024)
def positional_binding(sql: str) -> tuple[str, Callable[[Params], Sequence[Any]]]:
    """``positional_style``'s text of ``sql``, and what takes its parameters out of a
    ``dict`` in their order: one ``itemgetter`` call, not a loop (a statement of 100 jobs
    binds 1,300)."""
    text, names = positional_style(sql)
    if len(names) == 1:
        (name,) = names
        return text, lambda params: (params[name],)
    return text, itemgetter(*names) if names else lambda params: ()


@lru_cache(maxsize=128)
def row_names(names: tuple[str, ...], count: int) -> tuple[str, ...]:
    """The parameter names of ``count`` rows of ``names``, row after row: ``<name>_<n>``."""
    return tuple(f"{name}_{n}" for n in range(count) for name in names)


class SqliteDialect(Dialect):
    vendor = "sqlite"
    NOW = NOW
    WAKE = "data_version"
    #: One write statement takes the write lock before it reads (as ``BEGIN IMMEDIATE``
    #: does), so it sees every committed job and passes none over: no row of NULLs.
    ONE_STATEMENT_CLAIM = True
    is_set = staticmethod(is_set)
    is_unset = staticmethod(is_unset)

    SETTLE, RETRY, PRIOR, HEAD = SETTLE, RETRY, PRIOR, HEAD
    ANY_DUE, NEXT_DUE = ANY_DUE, NEXT_DUE
    CREATE_CLOCK, ADVANCE_CLOCK = common.CREATE_CLOCK, common.ADVANCE_CLOCK
    ANY_UNPOSITIONED = common.any_unpositioned(is_unset)
    HEARTBEAT = HEARTBEAT

    def _execute_on_driver(
        self, raw: Any, sql: str, params: Params, many: bool, context: Mapping[str, Any]
    ) -> Any:
        text, pick = positional_binding(sql)
        return raw.execute(text, pick(params))

    def heads_statement(self, queues: Sequence[str]) -> tuple[str, Params]:
        return HEADS_OF_QUEUES, {"queues": json.dumps(list(queues))}

    def capped_counts_statement(self, queues: Sequence[str], cap: int) -> tuple[str, Params]:
        return capped_counts(cap), {"queues": json.dumps(list(queues))}

    # locks: the write transaction holds every one

    def bound_lock_waits(self) -> None:
        """The busy timeout already bounds every wait for the write lock."""

    def between_write_batches(self, held: float) -> None:
        """One writer at a time, and a writer waiting for the lock sleeps between its
        tries: a batch begun right after the last one's commit takes the lock again before
        any of them wakes (a prune of 1,000-row batches let two workers drain 26 jobs/s
        where they drained 1,025). So wait as long as the batch held the lock, and at least
        ``BUSY_HANDLER_LONGEST_SLEEP``: every waiting writer gets its turn, and a long run
        of batches holds the lock half the time at most."""
        time.sleep(max(held, BUSY_HANDLER_LONGEST_SLEEP))

    def lock_queue(self, queue: str) -> None:
        """The write transaction already excludes every other writer."""

    def lock_queues(self, queues: Sequence[str]) -> None:
        """The write transaction already excludes every other writer."""

    def lock_queues_of_jobs(self, job_ids: Sequence[str]) -> None:
        """The write transaction already excludes every other writer."""

    def lock_queue_of(self, job_id: str) -> str | None:
        rows = self.fetch(QUEUE_OF_JOB, {"job_id": job_id})
        return str(rows[0][0]) if rows else None

    def notify(self, lane: str) -> None:
        """Workers notice commits by ``PRAGMA data_version``: nothing to send."""

    # many rows at once

    def fetch_rows(
        self,
        statement: Callable[[int], str],
        names: Sequence[str],
        rows: Iterable[Sequence[Any]],
        extra: Mapping[str, Any] | None = None,
    ) -> list[Row]:
        """Run ``statement(count)`` for ``rows`` (values of ``names``), ``count`` rows at a
        time, ``extra`` bound beside them, and ``%(first_row)s``: the index in ``rows`` of
        the statement's first row. The rows every statement returned.

        As many rows per statement as the library binds (a SQLite build option: 32,766 by
        default, 999 before 3.32), at most ``ROWS_PER_STATEMENT``. ``rows`` is read one
        statement's worth at a time: rows made as it goes live for one statement.
        """
        extra = dict(extra or {})
        self.connection.ensure_connection()
        limit = int(self.connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
        step = max(1, min(ROWS_PER_STATEMENT, (limit - len(extra) - 1) // len(names)))
        found: list[Row] = []
        start = 0
        for chunk in batched(rows, step):
            params = {**extra, "first_row": start}
            flat = chain.from_iterable(chunk)
            # strict: a chunk of too few or too many values fails here, not in SQLite.
            params.update(zip(row_names(tuple(names), len(chunk)), flat, strict=True))
            found.extend(self.fetch(statement(len(chunk)), params))
            start += len(chunk)
        return found

    # the steps verbs take

    def claim_sql(self, lanes: LaneTerms, limit: int) -> str:
        """The claim; it binds ``%(limit)s``."""
        return claim(lanes.predicate())

    def refresh_head(self, queue: str, entered: Sequence[int] = ()) -> Row | None:
        """The queue's head row, made ready; a head it displaced (one of ``entered`` took
        its place) loses its ready flag."""
        return self.refresh_head_in_steps(queue, entered, DEMOTE, MARK_READY)

    def enter_jobs(
        self, batch: Sequence[NewJob], delays: Sequence[bool], now: datetime
    ) -> tuple[list[Row], set[str], dict[int, bool]]:
        """Insert ``batch``: (id, job_id, enqueued_at, ready) of each row inserted, the
        queues created, and the ready flags the queues' heads then took."""
        queues = sorted({new.queue for new in batch})
        stamp = self.param_datetime(now)
        found = self.fetch_rows(create_queues, CREATE_QUEUES_ROW, ((q, stamp) for q in queues))
        created = {name for (name,) in found}
        if len(batch) == 1:
            return self._enter_job(batch[0], delays[0], created), created, {}
        heads_of_created = best_new_jobs(batch, delays, created)
        values = (
            (index, *self.job_row(new, delays[index]), index in heads_of_created)
            for index, new in enumerate(batch)
        )
        inserted = self.fetch_rows(insert_jobs, INSERT_JOBS_ROW, values)
        ready: dict[int, bool] = {}
        if len(created) == len(queues):
            return inserted, created, ready  # each queue's head was decided in the insert
        first: dict[str, int] = {}
        for index, new in enumerate(batch):
            first.setdefault(new.job_id, index)
        entered = sorted(
            {batch[first[row[1]]].queue for row in inserted if not delays[first[row[1]]]} - created
        )
        if entered:
            first_id = min(row[0] for row in inserted)
            refreshed = self.fetch_rows(
                refresh_heads, QUEUE_ROW, [(q,) for q in entered], extra={"first_id": first_id}
            )
            ready = {pk: bool(flag) for pk, flag in refreshed}
        return inserted, created, ready

    def _enter_job(self, new: NewJob, delayed: bool, created: set[str]) -> list[Row]:
        """``INSERT_JOB``, and if the job became the head of a queue that existed, the
        demotion of the head it displaced: two statements at most where a batch's way
        takes three (a refresh that rewrites the queue's head and the new row)."""
        values = {**self.job_values(new, delayed), "created": new.queue in created}
        inserted = self.fetch(INSERT_JOB, values)
        if inserted and inserted[0][3] and not values["created"]:
            self.execute(DEMOTE, {"queue": new.queue, "id": inserted[0][0]})
        return inserted

    def enter_job_alone(self, new: NewJob, delayed: bool, now: datetime) -> list[Row] | None:
        """``enter_jobs`` for one job, between a ``BEGIN IMMEDIATE`` and a ``COMMIT`` sent
        as statements of their own, for a caller in autocommit. Django's ``atomic()`` costs
        more than that: its bookkeeping, and the sqlite3 module's switch out of autocommit
        and back, about 90 µs of CPU per call, as much as django-tasks-db's whole
        ``INSERT`` costs beyond it.

        A taken id inserts nothing: the transaction is rolled back (with the queue created
        for it) and the answer is empty. Any error rolls it back before it reaches the
        caller: the connection is left in autocommit, as it was."""
        raw = self.connection.connection
        if raw is None or raw.in_transaction:
            return None
        self.execute(BEGIN_WRITE)
        try:
            inserted, _, ready = self.enter_jobs([new], [delayed], now)
            self.execute(COMMIT if inserted else ROLLBACK)
        except BaseException:
            if raw.in_transaction:
                self.execute(ROLLBACK)
            raise
        return [(pk, job_id, at, ready.get(pk, flag)) for pk, job_id, at, flag in inserted]

    def settle_many(self, rows: Sequence[tuple[Any, ...]], quiet: QuietLanes) -> list[Row]:
        """Settle each (``SETTLE_MANY_ROW``) and ready each queue's next head."""
        from ..rows import column_index

        found = self.fetch_rows(settle_many, SETTLE_MANY_ROW, rows)
        queues = sorted({row[column_index("queue")] for row in found})
        self.fetch_rows(ready_next_heads, QUEUE_ROW, [(q,) for q in queues])
        return found

    def due_delayed(self, at: Any, limit: int) -> list[Row]:
        """Due delayed jobs (id, queue), due order, of queues this transaction may change."""
        return self.fetch(DUE_DELAYED, {"now": at, "limit": limit})

    def enter_order(self, pk: int) -> int:
        """Give a due delayed job the next position: it joins its queue's order."""
        position = self.fetch(NEXT_ID)[0][0]
        return self.execute(POSITION, {"position": position, "id": pk})

    def feed_clock(self) -> list[Row]:
        """The feed clock's last position (locked for this transaction)."""
        return self.fetch(READ_CLOCK)

    def position_rows(self, base: int, batch: int) -> int:
        return self.execute(POSITION_ROWS, {"base": base, "batch": batch})

    def forget_idle_queues(self, params: Params) -> int:
        return self.execute(DELETE_IDLE_QUEUES, params)

    def data_version(self) -> int:
        """A number that changes whenever another connection commits."""
        return int(self.fetch(DATA_VERSION)[0][0])

    def database_files(self) -> tuple[str, ...]:
        """The database file and its write-ahead log: a commit writes one of them (the log
        in WAL mode, the file itself with a rollback journal)."""
        name = str(self.connection.settings_dict["NAME"] or "")
        if not name or name == ":memory:" or name.startswith("file:") or "mode=memory" in name:
            return ()
        return (name, f"{name}-wal")
