"""PostgreSQL's enqueue: many jobs in one or two statements that also settle their queues' heads.

Part of ``PostgresDialect`` (``dialects.postgres``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...conf import setting
from .base import JOB_VALUE_COLUMNS, Dialect, Row, named_job_values
from .postgres_claims import NEXT_JOB_ID, NOW, displaced

if TYPE_CHECKING:
    from ..enqueue import NewJob

#: The jobs of a call as rows ``u``, from one array per column, or for a one-job call from
#: plain parameters (which psycopg sends faster than one-element arrays).
JOB_ROWS = (
    "AS u(job_id, queue, lane, priority, payload, max_recoveries, delayed, run_after, "
    "retry_policy, timeout, trace_context, ordinal)"
)
JOBS_FROM_ARRAYS = f"""unnest(
    %(job_id)b::text[], %(queue)b::text[], %(lane)b::text[], %(priority)b::bigint[],
    %(payload)b::jsonb[], %(max_recoveries)b::bigint[], %(delayed)b::boolean[],
    %(run_after)b::timestamptz[], %(retry_policy)b::jsonb[], %(timeout)b::double precision[],
    %(trace_context)b::jsonb[]
) WITH ORDINALITY {JOB_ROWS}"""
JOB_FROM_VALUES = f"""(VALUES (
    %(job_id)s::text, %(queue)s::text, %(lane)s::text, %(priority)s::bigint,
    %(payload)s::jsonb, %(max_recoveries)s::bigint, %(delayed)s::boolean,
    %(run_after)s::timestamptz, %(retry_policy)s::jsonb, %(timeout)s::double precision,
    %(trace_context)s::jsonb, 1::bigint)) {JOB_ROWS}"""
QUEUES_FROM_ARRAY = "SELECT unnest(%(queues)b::text[]), %(created_at)s"
QUEUE_FROM_VALUES = "VALUES (%(queue)s, %(created_at)s)"


#: Lock a queue's row that exists (an ``INSERT``'s conflict clause): ``DO UPDATE`` locks it
#: even if it was committed after the statement's snapshot, and ``WHERE FALSE`` updates
#: nothing, so the lock writes no new version of the row (a same-value update wrote one
#: per enqueue, and a dead one for vacuum) and ``RETURNING`` leaves the row out. The lock
#: is ``FOR UPDATE``'s, as the workers' ``LOCK_QUEUE``: the key column is in the ``SET``.
LOCK_EXISTING_QUEUE = "ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name WHERE FALSE"


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
    locked; an existing row is locked by ``LOCK_EXISTING_QUEUE`` and not returned, so the
    rows returned are the queues inserted here. One result row per queue created, with the
    jobs entered into it.
    """
    return f"""
WITH created AS (
    INSERT INTO watchdog_queue (name, created_at) {queues}
    {LOCK_EXISTING_QUEUE}
    RETURNING name
),
input AS (
    SELECT {NEXT_JOB_ID} AS id, u.*
      FROM {jobs}
     WHERE u.queue IN (SELECT name FROM created)
     ORDER BY u.ordinal
),
best AS (
    SELECT DISTINCT ON (queue) id FROM input
     WHERE NOT delayed
     ORDER BY queue, priority DESC, id
),
inserted AS ({insert_jobs("i.id IN (SELECT id FROM best)")})
SELECT created.name,
       inserted.id, inserted.job_id, inserted.enqueued_at, inserted.ready,
       CASE WHEN inserted.ready OR inserted.delayed THEN pg_notify(%(channel)s, inserted.lane) END
  FROM created LEFT JOIN inserted ON inserted.queue = created.name
"""


#: One job's queue, locked, or created (its name returned then): first of the two
#: statements of a job enqueued alone (``enter_job_alone``), or inside a transaction into a
#: queue the connection has seen exist (``known_queues``). It touches the queue's row only,
#: where ``ENTER_NEW_QUEUE`` into a queue that exists also starts and ends an insert of
#: jobs that inserts none (its plan's every node, the job table and its 23 indexes opened
#: and closed), and binds and sends every value of the job for it.
HOLD_QUEUE = f"""
INSERT INTO watchdog_queue (name, created_at) VALUES (%(queue)s, %(created_at)s)
{LOCK_EXISTING_QUEUE}
RETURNING name
"""
#: How many queue names ``known_queues`` keeps per connection before it starts afresh.
KNOWN_QUEUES = 1024
#: Added to ``insert_with_heads`` after ``HOLD_QUEUE``: a job not inserted (its id was
#: taken) into the queue ``HOLD_QUEUE`` created deletes that queue again, so the implicit
#: transaction leaves nothing behind, and no statement fails. The queue row's ``xmax``
#: tells which: 0 on the row ``HOLD_QUEUE`` inserted, this transaction's id on a row it
#: locked (``LOCK_EXISTING_QUEUE``). Into a queue that existed, a taken id writes nothing
#: but that lock. The caller learns of the taken id from the empty answer.
UNDO_NEW_QUEUE = """,
undone AS (
    DELETE FROM watchdog_queue q
     WHERE q.name = %(queue)s AND q.xmax = 0 AND NOT EXISTS (SELECT FROM inserted)
)"""


#: The head a one-job statement's job displaces (``displaced``): the one id, computed once
#: before the update runs, makes the update a probe of the primary key.
DEMOTE_ONE = f"""
    UPDATE watchdog_job j SET ready = FALSE
     WHERE j.id = (SELECT {displaced("i.queue")} FROM inserted i WHERE i.ready)
       AND j.cancellation_id IS NULL
    RETURNING 1
"""
#: The heads the jobs of many queues displace, each by its id beside its new head.
DEMOTE_EACH = f"""
    UPDATE watchdog_job j SET ready = FALSE
      FROM inserted i CROSS JOIN LATERAL (SELECT {displaced("i.queue")} AS id) AS displaced
     WHERE i.ready AND j.id = displaced.id AND j.cancellation_id IS NULL
    RETURNING 1
"""


def insert_with_heads(jobs: str, demote: str, undo: str = "") -> str:
    """Second statement, for the jobs of queues that existed (locked by the first, so this
    statement's snapshot is current), or after ``HOLD_QUEUE`` for a job enqueued alone,
    into a queue held or just created: insert them and settle each queue's head.

    A queue's best new job becomes its head when nothing runs or waits to retry there and
    no queued job ranks at least as high (older jobs win ties); the head it displaces loses
    its ready flag. Workers of the lanes given a ready job (or a delayed one, whose due time
    they must learn) are woken. The three probes are ``LIMIT 1`` subqueries, not ``NOT
    EXISTS``: PostgreSQL may turn ``NOT EXISTS`` into an anti-join that reads a whole index
    when a young table's statistics say it is tiny; a subquery with ``LIMIT`` stays a probe
    on the queue's index entries, whatever the statistics. ``demote`` takes the displaced
    heads' ready flags (``DEMOTE_ONE``, ``DEMOTE_EACH``); ``undo``, a data-modifying CTE
    that reads ``inserted``, runs with them (``UNDO_NEW_QUEUE``).
    """
    return f"""
WITH input AS (
    SELECT {NEXT_JOB_ID} AS id, u.*
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
demoted AS ({demote}){undo}
SELECT inserted.id, inserted.job_id, inserted.enqueued_at, inserted.ready,
       CASE WHEN inserted.ready OR inserted.delayed THEN pg_notify(%(channel)s, inserted.lane) END
  FROM inserted
"""


ENTER_NEW_QUEUE = enter_new_queues(QUEUE_FROM_VALUES, JOB_FROM_VALUES)
ENTER_NEW_QUEUES = enter_new_queues(QUEUES_FROM_ARRAY, JOBS_FROM_ARRAYS)
INSERT_WITH_HEAD = insert_with_heads(JOB_FROM_VALUES, DEMOTE_ONE)
INSERT_WITH_HEADS = insert_with_heads(JOBS_FROM_ARRAYS, DEMOTE_EACH)
INSERT_WITH_HEAD_OR_UNDO = insert_with_heads(JOB_FROM_VALUES, DEMOTE_ONE, UNDO_NEW_QUEUE)


class PostgresEnqueue(Dialect):
    """PostgreSQL's ``enter_jobs`` (a part of ``PostgresDialect``)."""

    def param_payload(self, new: NewJob) -> Any:
        """``jsonb``: psycopg's own dump of the value, as the ORM binds it."""
        return self.param_json(new.payload)

    def enter_jobs(
        self, batch: Sequence[NewJob], delays: Sequence[bool], now: Any
    ) -> tuple[list[Row], set[str], dict[int, bool]]:
        """Insert ``batch``: (id, job_id, enqueued_at, ready) of each row inserted, the
        queues created, and no later ready flags (each statement settles its heads).

        One statement when every queue is new (the common case: a queue per object); a
        second, sent once the first has locked them, for the jobs of queues that existed.
        One job into a queue the connection has seen exist (``known_queues``): its lock
        (``HOLD_QUEUE``, which creates it if it is gone after all), then that second
        statement, both in one exchange (``fetch_in_turn``: with the transaction's
        ``BEGIN`` if it is yet to be sent).
        """
        channel = setting("NOTIFY_CHANNEL")
        per_job = [self.job_row(new, delayed) for new, delayed in zip(batch, delays, strict=True)]
        stamp = self.param_datetime(now)
        inserted: list[Row] = []
        created: set[str] = set()
        known = known_queues(self.connection)
        if len(batch) == 1 and batch[0].queue in known:
            params = {**named_job_values(per_job[0]), "created_at": stamp, "channel": channel}
            held, inserted = self.fetch_in_turn([(HOLD_QUEUE, params), (INSERT_WITH_HEAD, params)])
            if held:
                created.add(batch[0].queue)
            return [tuple(row[:4]) for row in inserted], created, {}
        if len(batch) == 1:
            params = {**named_job_values(per_job[0]), "created_at": stamp, "channel": channel}
            sql = ENTER_NEW_QUEUE
        else:
            params = {**_by_column(per_job), "queues": sorted({new.queue for new in batch})}
            params.update(created_at=stamp, channel=channel)
            sql = ENTER_NEW_QUEUES
        (entering,) = self.fetch_in_turn([(sql, params)])
        for name, *entered in entering:
            created.add(name)
            if entered[0] is not None:
                inserted.append(tuple(entered[:4]))
        known.update(new.queue for new in batch)
        rest = [
            values for new, values in zip(batch, per_job, strict=True) if new.queue not in created
        ]
        if rest:
            sql, params = INSERT_WITH_HEAD, named_job_values(rest[0])
            if len(rest) > 1:
                sql, params = INSERT_WITH_HEADS, _by_column(rest)
            inserted.extend(self.fetch_in_turn([(sql, {**params, "channel": channel})])[0])
        return [tuple(row[:4]) for row in inserted], created, {}

    def enter_job_alone(self, new: NewJob, delayed: bool, now: Any) -> list[Row] | None:
        """Hold the job's queue (lock it, or create it), then insert the job and settle the
        head in a statement whose snapshot follows the lock (``insert_with_heads``; into a
        queue just created nothing else is there, so the job is its head): both sent
        together (``fetch_pipelined``), one exchange and one implicit transaction.

        A taken id inserts nothing, changes no head and, into a queue created here, deletes
        that queue again (``UNDO_NEW_QUEUE``): the answer is empty and the implicit
        transaction leaves nothing behind. Inside a transaction the pipeline would cost
        more than the exchange it saves (psycopg's ``BEGIN`` is an exchange of its own)."""
        if not self.pipelined():
            return None
        params = {
            **self.job_values(new, delayed),
            "created_at": self.param_datetime(now),
            "channel": setting("NOTIFY_CHANNEL"),
        }
        _, inserted = self.fetch_pipelined(
            [(HOLD_QUEUE, params), (INSERT_WITH_HEAD_OR_UNDO, params)]
        )
        if inserted:
            known_queues(self.connection).add(new.queue)
        return [tuple(row[:4]) for row in inserted]


def known_queues(connection: Any) -> set[str]:
    """The queues this connection has seen exist (``KNOWN_QUEUES`` at most, then none
    again): a hint, not a fact, since a queue row may be deleted (``idle_queues``) or its
    creation rolled back; ``HOLD_QUEUE`` creates a queue it does not find."""
    known: set[str] | None = getattr(connection, "_watchdog_known_queues", None)
    if known is None or len(known) >= KNOWN_QUEUES:
        known = connection._watchdog_known_queues = set()
    return known


def _by_column(per_job: Sequence[Sequence[Any]]) -> dict[str, list[Any]]:
    """One array per column of ``Dialect.job_row``'s rows (what ``JOBS_FROM_ARRAYS``
    binds)."""
    columns = zip(*per_job, strict=True)
    return {name: list(column) for name, column in zip(JOB_VALUE_COLUMNS, columns, strict=True)}
