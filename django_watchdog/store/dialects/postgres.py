"""PostgreSQL: every statement the store runs there, by name, beside the method that binds it.

Many workers claim at once: a change to a queue first locks its ``watchdog_queue`` row (in
name order when several), claims skip locked queues (``SKIP LOCKED``), and whatever makes a
job ready sends ``NOTIFY`` inside its transaction, so idle workers wake at commit. PostgreSQL
folds ``x = TRUE`` into ``x``, the form of its partial-index predicates.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.db import transaction

from ...conf import prepared_statements, setting
from .. import waits
from . import common
from .base import Dialect, Params, Row

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from ..enqueue import NewJob

NOW = "clock_timestamp()"
is_set = Dialect.is_set
is_unset = Dialect.is_unset

#: psycopg prepares a statement only when asked (``prepare=True``): ours.
NEVER_AUTO_PREPARE = 2**31 - 1

# locks

#: Bound every lock wait for the rest of the transaction to ``%(lock_timeout)s``.
BOUND_LOCK_WAITS = "SELECT set_config('lock_timeout', %(lock_timeout)s, true)"
LOCK_QUEUE = "SELECT 1 FROM watchdog_queue WHERE name = %(queue)s FOR UPDATE"
LOCK_QUEUE_OF_JOB = """
SELECT q.name FROM watchdog_queue q
 WHERE q.name = (SELECT j.queue FROM watchdog_job j WHERE j.job_id = %(job_id)s)
   FOR UPDATE OF q
"""
#: The same, first bounding lock waits for the rest of the transaction: the settle's first
#: statement, so a bounded settle costs no extra round trip. The row is locked above the
#: join, so ``bound`` is evaluated before the lock is waited for.
LOCK_QUEUE_OF_JOB_BOUNDED = """
WITH bound AS MATERIALIZED (SELECT set_config('lock_timeout', %(lock_timeout)s, true) AS t)
SELECT q.name FROM bound, watchdog_queue q
 WHERE q.name = (SELECT j.queue FROM watchdog_job j WHERE j.job_id = %(job_id)s)
   FOR UPDATE OF q
"""
LOCK_QUEUES = """
SELECT name FROM watchdog_queue WHERE name = ANY(%(queues)s::text[]) ORDER BY name FOR UPDATE
"""
LOCK_QUEUES_OF_JOBS = """
SELECT q.name FROM watchdog_queue q
 WHERE q.name IN (SELECT j.queue FROM watchdog_job j WHERE j.job_id = ANY(%(job_ids)s::text[]))
 ORDER BY q.name
   FOR UPDATE OF q
"""
NOTIFY = "SELECT pg_notify(%(channel)s, %(lane)s)"

# claim, settle


@lru_cache(maxsize=64)
def claim(lanes: str) -> str:
    """Take the best ready jobs of the partition in one statement; each candidate's queue
    row is locked with SKIP LOCKED, so concurrent claimers spread over queues instead of
    waiting on each other."""
    return f"""
WITH candidate AS (
    SELECT {common.CANDIDATE_COLUMNS}
      FROM watchdog_job j
      JOIN watchdog_queue q ON q.name = j.queue
     WHERE {common.claimable(is_set, lanes)}
     ORDER BY j.priority DESC, j.position ASC
     LIMIT %(limit)s
       FOR UPDATE OF q SKIP LOCKED
),
picked AS ({common.picked("candidate")})
UPDATE watchdog_job AS taken SET {common.claim_set(NOW)}
  FROM picked
 WHERE taken.id = picked.id AND taken.ready = TRUE AND taken.state = 'queued'
RETURNING {common.job_columns("taken")}
"""


@lru_cache(maxsize=64)
def any_ready(lanes: str) -> str:
    return common.any_ready(is_set, lanes)


SETTLE = common.settle(NOW)
RETRY = common.retry(NOW)
PRIOR = common.PRIOR

# queue heads

HEAD = common.head(is_unset)


def refresh(head: str, only_if: str = "") -> str:
    """Common table expressions that make ``head`` (a ``common.head`` row) ready and waken
    its lane's workers (unless in ``%(quiet_lanes)s``), and take the ready flag from the
    head it displaced if ``head`` is one of ``%(entered)s``; ``only_if`` makes it
    conditional."""
    return f"""
head AS ({head}),
marked AS (
    UPDATE watchdog_job SET ready = TRUE FROM head
     WHERE watchdog_job.id = head.id AND head.rank <> 0 AND NOT watchdog_job.ready {only_if}
    RETURNING CASE WHEN watchdog_job.lane = ANY(%(quiet_lanes)s::text[]) THEN NULL
                   ELSE pg_notify(%(channel)s, watchdog_job.lane) END
),
demoted AS (
    UPDATE watchdog_job SET ready = FALSE FROM head
     WHERE watchdog_job.queue = %(queue)s AND watchdog_job.ready
       AND watchdog_job.cancellation_id IS NULL
       AND watchdog_job.id <> head.id AND head.rank <> 0 AND head.id = ANY(%(entered)s::bigint[])
    RETURNING 1
)
"""


#: The head, its ready flag and the displaced head's, in one round trip.
REFRESH_HEAD = f"WITH {refresh(HEAD)} SELECT * FROM head"
#: Settle, pick the queue's next head and mark it ready, in one round trip. The statement's
#: snapshot still shows the settling job running, so the head query skips it; every other
#: row of the queue is current because the queue's lock is held.
SETTLE_AND_REFRESH = f"""
WITH settled AS ({SETTLE}),
{
    refresh(
        common.head(is_unset, not_settling="AND job_id <> %(job_id)s"),
        only_if="AND EXISTS (SELECT 1 FROM settled)",
    )
}
SELECT settled.*, head.* FROM settled LEFT JOIN head ON TRUE
"""

# enqueue

#: The jobs of a call as rows ``u``, from one array per column, or for a one-job call from
#: plain parameters (which psycopg sends faster than one-element arrays).
JOB_ROWS = (
    "AS u(job_id, queue, lane, priority, payload, max_recoveries, delayed, run_after, "
    "retry_policy, timeout, trace_context, ordinal)"
)
JOBS_FROM_ARRAYS = f"""unnest(
    %(job_id)s::text[], %(queue)s::text[], %(lane)s::text[], %(priority)s::bigint[],
    %(payload)s::jsonb[], %(max_recoveries)s::bigint[], %(delayed)s::boolean[],
    %(run_after)s::timestamptz[], %(retry_policy)s::jsonb[], %(timeout)s::double precision[],
    %(trace_context)s::jsonb[]
) WITH ORDINALITY {JOB_ROWS}"""
JOB_FROM_VALUES = f"""(VALUES (
    %(job_id)s::text, %(queue)s::text, %(lane)s::text, %(priority)s::bigint,
    %(payload)s::jsonb, %(max_recoveries)s::bigint, %(delayed)s::boolean,
    %(run_after)s::timestamptz, %(retry_policy)s::jsonb, %(timeout)s::double precision,
    %(trace_context)s::jsonb, 1::bigint)) {JOB_ROWS}"""
QUEUES_FROM_ARRAY = "SELECT unnest(%(queues)s::text[]), %(created_at)s"
QUEUE_FROM_VALUES = "VALUES (%(queue)s, %(created_at)s)"


def insert_jobs(ready: str, source: str = "input i") -> str:
    """Insert the rows of ``input`` (``source`` may join more to it), each ``ready`` as the
    expression ``ready`` decides; a repeated ``job_id`` is left alone."""
    return f"""
    INSERT INTO watchdog_job
        (id, position, job_id, queue, lane, priority, payload, max_recoveries, state,
         recovery_count, attempts, ready, delayed, run_after, retry_policy, timeout,
         trace_context, enqueued_at)
    SELECT i.id, CASE WHEN i.delayed THEN NULL ELSE i.id END, i.job_id, i.queue, i.lane,
           i.priority, i.payload, i.max_recoveries, 'queued', 0, 0, {ready},
           i.delayed, i.run_after, i.retry_policy, i.timeout, i.trace_context, {NOW}
      FROM {source}
     ORDER BY i.id
    ON CONFLICT (job_id) DO NOTHING
    RETURNING id, job_id, queue, lane, enqueued_at, ready, delayed
"""


def enter_new_queues(queues: str, jobs: str) -> str:
    """First statement: create the missing queues and lock the others (name order), and
    enter the jobs of the queues this statement created.

    Nothing else is in such a queue (queue rows are never deleted, and a concurrent creator
    waits for ours), so its best non-delayed new job is its head: no probe of other rows,
    whose snapshot could predate the lock. A row this transaction inserted is as good as
    locked; ``DO UPDATE`` locks an existing row even if it was committed after this
    statement's snapshot (a same-value update, so a HOT one). ``xmax = 0`` tells the rows
    inserted here. One result row per held queue, with the jobs entered into it.
    """
    return f"""
WITH held AS (
    INSERT INTO watchdog_queue (name, created_at) {queues}
    ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
    RETURNING name, xmax = 0 AS created
),
input AS (
    SELECT nextval(pg_get_serial_sequence('watchdog_job', 'id')) AS id, u.*
      FROM {jobs}
     WHERE u.queue IN (SELECT name FROM held WHERE created)
     ORDER BY u.ordinal
),
best AS (
    SELECT DISTINCT ON (queue) id FROM input
     WHERE NOT delayed
     ORDER BY queue, priority DESC, id
),
inserted AS ({insert_jobs("i.id IN (SELECT id FROM best)")})
SELECT held.name, held.created,
       inserted.id, inserted.job_id, inserted.enqueued_at, inserted.ready,
       CASE WHEN inserted.ready OR inserted.delayed THEN pg_notify(%(channel)s, inserted.lane) END
  FROM held LEFT JOIN inserted ON inserted.queue = held.name
"""


def insert_with_heads(jobs: str) -> str:
    """Second statement, for the jobs of queues that existed (locked by the first, so this
    statement's snapshot is current): insert them and settle each queue's head.

    A queue's best new job becomes its head when nothing runs or waits to retry there and
    no queued job ranks at least as high (older jobs win ties); the head it displaces loses
    its ready flag. Workers of the lanes given a ready job (or a delayed one, whose due time
    they must learn) are woken. The three probes are ``LIMIT 1`` subqueries, not ``NOT
    EXISTS``: PostgreSQL may turn ``NOT EXISTS`` into an anti-join that reads a whole index
    when a young table's statistics say it is tiny; a subquery with ``LIMIT`` stays a probe
    on the queue's index entries, whatever the statistics.
    """
    return f"""
WITH input AS (
    SELECT nextval(pg_get_serial_sequence('watchdog_job', 'id')) AS id, u.*
      FROM {jobs}
     ORDER BY u.ordinal
),
best AS (
    SELECT DISTINCT ON (queue) id, queue, priority FROM input
     WHERE NOT delayed
     ORDER BY queue, priority DESC, id
),
promoted AS (
    SELECT b.id, b.queue FROM best b
     WHERE (SELECT 1 FROM watchdog_job j
             WHERE j.queue = b.queue AND j.state = 'running' LIMIT 1) IS NULL
       AND (SELECT 1 FROM watchdog_job j
             WHERE j.queue = b.queue AND j.state = 'queued' AND j.retry_at IS NOT NULL
             LIMIT 1) IS NULL
       AND (SELECT 1 FROM watchdog_job j
             WHERE j.queue = b.queue AND j.state = 'queued' AND j.delayed = FALSE
               AND j.priority >= b.priority
             LIMIT 1) IS NULL
),
inserted AS ({insert_jobs("p.id IS NOT NULL", "input i LEFT JOIN promoted p ON p.id = i.id")}),
demoted AS (
    UPDATE watchdog_job j SET ready = FALSE FROM promoted p
     WHERE j.queue = p.queue AND j.ready AND j.cancellation_id IS NULL
    RETURNING 1
)
SELECT inserted.id, inserted.job_id, inserted.enqueued_at, inserted.ready,
       CASE WHEN inserted.ready OR inserted.delayed THEN pg_notify(%(channel)s, inserted.lane) END
  FROM inserted
"""


ENTER_NEW_QUEUE = enter_new_queues(QUEUE_FROM_VALUES, JOB_FROM_VALUES)
ENTER_NEW_QUEUES = enter_new_queues(QUEUES_FROM_ARRAY, JOBS_FROM_ARRAYS)
INSERT_WITH_HEAD = insert_with_heads(JOB_FROM_VALUES)
INSERT_WITH_HEADS = insert_with_heads(JOBS_FROM_ARRAYS)

# a batching worker's step

SETTLE_MANY = f"""
WITH input AS (
    SELECT * FROM unnest(%(job_id)s::text[], %(token)s::text[], %(outcome)s::text[],
                         %(reason)s::text[], %(result)s::jsonb[], %(traceback)s::text[])
        AS i(job_id, token, outcome, reason, result, traceback)
),
settled AS (
    UPDATE watchdog_job AS j SET {common.settle_set(NOW)}
      FROM input i
     WHERE j.job_id = i.job_id AND j.state = 'running' AND j.claim_token = i.token
    RETURNING {common.job_columns("j")}
),
head AS (
    SELECT h.* FROM (SELECT DISTINCT queue FROM settled) AS s
    CROSS JOIN LATERAL ({
    common.head(is_unset, queue="s.queue", not_settling="AND job_id <> ALL(%(job_id)s::text[])")
}) AS h
),
marked AS (
    UPDATE watchdog_job SET ready = TRUE FROM head
     WHERE watchdog_job.id = head.id AND head.rank <> 0 AND NOT watchdog_job.ready
    RETURNING CASE WHEN watchdog_job.lane = ANY(%(quiet_lanes)s::text[]) THEN NULL
                   ELSE pg_notify(%(channel)s, watchdog_job.lane) END
)
SELECT * FROM settled
"""
SETTLE_MANY_COLUMNS = ("job_id", "token", "outcome", "reason", "result", "traceback")

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
POSITION = """
UPDATE watchdog_job SET delayed = FALSE,
       position = nextval(pg_get_serial_sequence('watchdog_job', 'id'))
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

#: The planner's estimate of a query's rows: it reads the table statistics, not the rows.
EXPLAIN_JSON = "EXPLAIN (FORMAT JSON) "


def set_config(count: int) -> str:
    """Session settings (``%(parameter_n)s`` to ``%(value_n)s``), in one statement."""
    calls = (f"set_config(%(parameter_{n})s, %(value_{n})s, false)" for n in range(count))
    return f"SELECT {', '.join(calls)}"


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

# wake-up

#: ``%(channel)s`` is an identifier: quoted by psycopg's ``sql.Identifier``.
LISTEN = "LISTEN {channel}"


class PostgresDialect(Dialect):
    vendor = "postgresql"
    NOW = NOW
    WAKE = "notify"
    LOADS_TIMESTAMPTZ = True

    SETTLE, RETRY, PRIOR, HEAD = SETTLE, RETRY, PRIOR, HEAD
    ANY_DUE, NEXT_DUE = ANY_DUE, NEXT_DUE
    CREATE_CLOCK, ADVANCE_CLOCK = common.CREATE_CLOCK, common.ADVANCE_CLOCK
    ANY_UNPOSITIONED = common.any_unpositioned(is_unset)

    def fast_path(self) -> bool:
        """Prepared statements, unless ``conf.prepared_statements()`` says no
        (``PREPARED_STATEMENTS`` off, or behind a transaction pooler)."""
        return prepared_statements()

    @contextmanager
    def driver_cursor(self) -> Iterator[Any]:
        import psycopg

        connection = self.connection
        connection.ensure_connection()
        raw = connection.connection
        if raw.prepare_threshold is None:
            # Django disables preparing; allow it for statements that ask (ours) only.
            raw.prepare_threshold = NEVER_AUTO_PREPARE
        with psycopg.Cursor(raw) as cursor:
            yield cursor

    def _execute_on_driver(
        self, raw: Any, sql: str, params: Params, many: bool, context: Mapping[str, Any]
    ) -> Any:
        return raw.execute(sql, params, prepare=True)

    def claim_transaction(self, *, announcing: bool) -> AbstractContextManager[Any]:
        """None without ``queue_changed`` receivers: the claim is one statement (atomic on
        its own, and one round trip instead of three: an idle worker's wake-up latency)."""
        if not announcing:
            from contextlib import nullcontext

            return nullcontext()
        return transaction.atomic(using=self.using)

    def configure_session(self, values: Sequence[tuple[str, str]]) -> None:
        params: dict[str, str] = {}
        for n, (parameter, value) in enumerate(values):
            params.update({f"parameter_{n}": parameter, f"value_{n}": value})
        self.fetch(set_config(len(values)), params)

    def row_estimate(self, sql: str, params: Sequence[Any]) -> int | None:
        """EXPLAIN's estimate for an ORM query (its own ``%s`` parameters, on Django's
        cursor as the ORM runs it)."""
        import json

        with self.connection.cursor() as cursor:
            cursor.execute(EXPLAIN_JSON + sql, params)
            (plan,) = cursor.fetchone()
        if isinstance(plan, str):
            plan = json.loads(plan)
        return int(plan[0]["Plan"]["Plan Rows"])

    # locks

    def bound_lock_waits(self) -> None:
        """In a bounded block (``waits.bounded``), bound every lock wait for the rest of the
        caller's transaction."""
        seconds = waits.limit()
        if seconds is not None:
            self.fetch(BOUND_LOCK_WAITS, {"lock_timeout": waits.milliseconds(seconds)})

    def lock_queue(self, queue: str) -> None:
        """Serialise every change to ``queue`` until this transaction ends."""
        self.bound_lock_waits()
        self.fetch(LOCK_QUEUE, {"queue": queue})

    def lock_queues(self, queues: Sequence[str]) -> None:
        """Lock several queues in name order, so two multi-queue changes cannot deadlock."""
        self.bound_lock_waits()
        self.fetch(LOCK_QUEUES, {"queues": sorted(set(queues))})

    def lock_queues_of_jobs(self, job_ids: Sequence[str]) -> None:
        self.bound_lock_waits()
        self.fetch(LOCK_QUEUES_OF_JOBS, {"job_ids": list(job_ids)})

    def lock_queue_of(self, job_id: str) -> str | None:
        """Lock the queue of ``job_id`` (one round trip); its name, ``None`` if no job."""
        if (seconds := waits.limit()) is not None:
            rows = self.fetch(
                LOCK_QUEUE_OF_JOB_BOUNDED,
                {"lock_timeout": waits.milliseconds(seconds), "job_id": job_id},
            )
        else:
            rows = self.fetch(LOCK_QUEUE_OF_JOB, {"job_id": job_id})
        return str(rows[0][0]) if rows else None

    def notify(self, lane: str) -> None:
        """Wake idle workers of ``lane`` once this transaction commits."""
        self.fetch(NOTIFY, {"channel": setting("NOTIFY_CHANNEL"), "lane": lane})

    # the steps verbs take

    def claim_sql(self, lanes: str) -> str:
        return claim(lanes)

    def any_ready_sql(self, lanes: str) -> str:
        return any_ready(lanes)

    def settle_and_refresh(
        self, params: Params, queue: str, quiet_lanes: Sequence[str]
    ) -> tuple[Row, Row | None] | None:
        """Settle (``SETTLE``'s parameters), pick the queue's next head and mark it ready
        (waking its lane unless in ``quiet_lanes``), in one round trip."""
        from ..rows import job_fields

        bound = {
            **params,
            "queue": queue,
            "quiet_lanes": list(quiet_lanes),
            "channel": setting("NOTIFY_CHANNEL"),
            "entered": [],
        }
        found = self.fetch(SETTLE_AND_REFRESH, bound)
        if not found:
            return None
        width = len(job_fields())
        head = found[0][width:]
        return found[0][:width], (None if head[0] is None else head)

    def refresh_head(self, queue: str, entered: Sequence[int] = ()) -> Row | None:
        rows = self.fetch(
            REFRESH_HEAD,
            {
                "queue": queue,
                "quiet_lanes": [],
                "channel": setting("NOTIFY_CHANNEL"),
                "entered": list(entered),
            },
        )
        return rows[0] if rows else None

    def enter_jobs(
        self, batch: Sequence[NewJob], delays: Sequence[bool], now: Any
    ) -> tuple[list[Row], set[str], dict[int, bool]]:
        """Insert ``batch``: (id, job_id, enqueued_at, ready) of each row inserted, the
        queues created, and no later ready flags (each statement settles its heads).

        One statement when every queue is new (the common case: a queue per object); a
        second, sent once the first has locked them, for the jobs of queues that existed.
        """
        channel = setting("NOTIFY_CHANNEL")
        per_job = [
            self.job_values(new, delayed) for new, delayed in zip(batch, delays, strict=True)
        ]
        stamp = self.param_datetime(now)
        inserted: list[Row] = []
        created: set[str] = set()
        if len(batch) == 1:
            params = {**per_job[0], "created_at": stamp, "channel": channel}
            sql = ENTER_NEW_QUEUE
        else:
            params = {**_by_column(per_job), "queues": sorted({new.queue for new in batch})}
            params.update(created_at=stamp, channel=channel)
            sql = ENTER_NEW_QUEUES
        for name, new_queue, *entered in self.fetch(sql, params):
            if new_queue:
                created.add(name)
            if entered[0] is not None:
                inserted.append(tuple(entered[:4]))
        rest = [
            values for new, values in zip(batch, per_job, strict=True) if new.queue not in created
        ]
        if len(rest) == 1:
            inserted.extend(self.fetch(INSERT_WITH_HEAD, {**rest[0], "channel": channel}))
        elif rest:
            inserted.extend(self.fetch(INSERT_WITH_HEADS, {**_by_column(rest), "channel": channel}))
        return [tuple(row[:4]) for row in inserted], created, {}

    def settle_many(self, rows: Sequence[tuple[Any, ...]], quiet_lanes: Sequence[str]) -> list[Row]:
        """Settle each (``SETTLE_MANY_COLUMNS``) and ready each queue's next head."""
        by_column = {
            name: list(column)
            for name, column in zip(SETTLE_MANY_COLUMNS, zip(*rows, strict=True), strict=True)
        }
        params = {
            **by_column,
            "quiet_lanes": list(quiet_lanes),
            "channel": setting("NOTIFY_CHANNEL"),
        }
        return self.fetch(SETTLE_MANY, params)

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

    @contextmanager
    def notifications(self, channel: str) -> Iterator[Any]:
        """A connection of its own, listening on ``channel``: ``.notifies(timeout=…)``."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(**self.listen_params(), autocommit=True) as listener:
            listener.execute(sql.SQL(LISTEN).format(channel=sql.Identifier(channel)))
            yield listener

    def listen_params(self) -> dict[str, Any]:
        """psycopg connection arguments for the database behind this alias."""
        settings_dict = self.connection.settings_dict
        params: dict[str, Any] = {"dbname": settings_dict["NAME"] or "postgres"}
        for key, name in (
            ("USER", "user"),
            ("PASSWORD", "password"),
            ("HOST", "host"),
            ("PORT", "port"),
        ):
            if settings_dict.get(key):
                params[name] = settings_dict[key]
        options = settings_dict.get("OPTIONS") or {}
        for key in LISTEN_OPTIONS:
            if key in options:
                params[key] = options[key]
        return params


#: Connection options a listening connection takes from the database's ``OPTIONS``.
LISTEN_OPTIONS = (
    "sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "service", "passfile",
    "options", "application_name",
)  # fmt: skip


def _by_column(per_job: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """One array per column of ``Dialect.job_values`` (what ``JOBS_FROM_ARRAYS`` binds)."""
    return {name: [values[name] for values in per_job] for name in per_job[0]}
