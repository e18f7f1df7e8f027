"""MariaDB's enqueue: hold the queues, insert the new ids, settle the heads.

One job (``enqueue()``, the common call) is one statement, one exchange with the server: a
``CALL`` of the procedure migration 0015 stores (``CALL_ENTER_JOB``), or where it is missing
the same body as an anonymous block (``BEGIN NOT ATOMIC``, ``ENTER_JOB``), that does on the
server what the steps below do, under a savepoint of its own inside the caller's
transaction, or as a transaction of its own for a caller in autocommit (``ENTER_JOB_ALONE``,
with ``START TRANSACTION`` and ``COMMIT``). It holds the queue (``HOLD_QUEUE``: creates it,
or locks its row), decides from what the queue holds after that lock whether the job
becomes its head (``PROMOTED``), inserts it so, and takes the ready flag of a head it
displaces. Any error undoes the block's writes before it reaches the client (its handler
rolls back to the savepoint, or the transaction); a repeated id then takes the steps' way,
which answers it. The migration's body and ``ENTER_JOB``'s must say the same: a test
compares what each does.

A batch, or a job whose statements must be bounded (``waits``), takes the steps:

1. the batch's queues, locked in name order (``lock_queues``), the missing ones inserted; a
   concurrent creator makes that insert wait, then fail with 1062: the step is repeated;
2. the jobs inserted with ``INSERT … RETURNING`` (MariaDB 10.5), each taking its id from the
   job id sequence (``NEW_IDS``, given out in row order) and, unless delayed, that id as its
   place in the order, as on PostgreSQL. The rows go to the server as one JSON document
   (``INSERT_JOBS``): a parameter per value cost the client more than the server's insert;
3. the heads of the queues that existed settled (``refresh_head``); a created queue's head
   is its best new job, decided before the insert.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from django.db import DatabaseError, IntegrityError

from ...domain.validation import IDENTIFIER_MAX, LANE_MAX
from .. import waits
from .base import Row, in_clause
from .mariadb_terms import (
    DEADLOCK,
    DUPLICATE_KEY,
    LOCK_WAIT_TIMEOUT,
    NEXT_ID,
    NOW,
    error_code,
    from_json,
    one_name_rows,
    quoted,
)
from .new_heads import best_new_jobs

if TYPE_CHECKING:
    from ..enqueue import NewJob
    from .mariadb import MariadbDialect

#: Times an enqueue re-reads and retries after a concurrent creator's duplicate key.
ENQUEUE_ATTEMPTS = 8

INSERT_JOB_ROW = (
    "job_id", "queue", "lane", "priority", "payload", "max_recoveries", "delayed", "run_after",
    "retry_policy", "timeout", "trace_context", "ready",
)  # fmt: skip


#: The highest id stored (``_pass_every_stored_id``).
HIGHEST_ID = "SELECT COALESCE(MAX(id), 0) FROM watchdog_job"


def pass_id(highest: int) -> str:
    """Set the id sequence to give ids above ``highest`` next (``SETVAL`` takes a literal)."""
    return f"SELECT SETVAL(watchdog_job_id_seq, {int(highest)})"


#: Insert the queues named in ``%(names)s`` (a JSON array of arrays of one name); a
#: concurrent creator makes it wait, then fail (1062).
CREATE_QUEUES = f"""
INSERT INTO watchdog_queue (name, created_at)
SELECT j.name, %(created_at)s
  FROM {from_json("%(names)s", [("name", f"VARCHAR({IDENTIFIER_MAX})")])}
"""
#: ``%(count)s`` ids from the job id sequence: a batch's rows take them in ascending order.
NEW_IDS = f"""
SELECT {NEXT_ID} FROM JSON_TABLE(CONCAT('[', REPEAT('0,', %(count)s - 1), '0]'),
                                 '$[*]' COLUMNS (n FOR ORDINALITY)) AS ids
"""


def job_row(ready: str) -> str:
    """One row of ``insert_job_rows``: the job's values (``%(<name>)s``), ``ready`` as the
    expression ``ready`` says, its id drawn from the job id sequence. A job in its queue's
    order takes its id as its position (a value refers to the row's columns set before
    it); a delayed job has none yet."""
    values = ", ".join(f"%({name})s" for name in INSERT_JOB_ROW[:-1])
    return (
        f"({NEXT_ID}, {values}, {ready}, CASE WHEN %(delayed)s THEN NULL ELSE id END,"
        f" 'queued', 0, 0, {NOW})"
    )


def insert_job_rows(rows: str) -> str:
    """Insert the job ``rows`` (``job_row``s, inserted and numbered in order)."""
    columns = ", ".join(quoted(name) for name in INSERT_JOB_ROW)
    return f"""
INSERT INTO watchdog_job
    (id, {columns}, position, state, recovery_count, attempts, enqueued_at)
VALUES {rows}
RETURNING id, job_id, enqueued_at, ready
"""


#: The column of each value of a row of ``INSERT_JOBS``, in row order: its id, then
#: ``INSERT_JOB_ROW``'s.
JOB_ROW_COLUMNS = (
    ("id", "BIGINT"),
    ("job_id", f"VARCHAR({IDENTIFIER_MAX})"),
    ("queue", f"VARCHAR({IDENTIFIER_MAX})"),
    ("lane", f"VARCHAR({LANE_MAX})"),
    ("priority", "BIGINT"),
    ("payload", "LONGTEXT"),
    ("max_recoveries", "BIGINT"),
    ("delayed", "BOOLEAN"),
    ("run_after", "DATETIME(6)"),
    ("retry_policy", "LONGTEXT"),
    ("timeout", "DOUBLE"),
    ("trace_context", "LONGTEXT"),
    ("ready", "BOOLEAN"),
)
#: Rows per ``INSERT_JOBS``. An ``INSERT … SELECT`` holds the table's ``AUTO_INCREMENT``
#: lock until it ends (``innodb_autoinc_lock_mode`` 1, the default), and an insert of
#: another session waits for it: one statement of 2,000 rows kept other enqueues waiting up
#: to 150 ms, one of 100 rows as long as the rows sent as values did (p99 17 ms).
ROWS_PER_INSERT = 100
#: Insert the jobs of ``%(rows)s`` (a JSON array of ``JOB_ROW_COLUMNS`` rows), each with
#: the id it holds and, unless delayed, that id as its position. Every row of one statement
#: has the same ``enqueued_at`` (``NOW`` is read once per statement), returned as text:
#: decoded once (``_Stamps``), where the driver would parse a ``DATETIME`` per row in
#: Python (a tenth of a batch's client time).
INSERT_JOBS = f"""
INSERT INTO watchdog_job
    (id, {", ".join(quoted(name) for name in INSERT_JOB_ROW)}, position, state, recovery_count,
     attempts, enqueued_at)
SELECT {", ".join(quoted(f"j.{name}") for name, _ in JOB_ROW_COLUMNS)},
       CASE WHEN j.`delayed` THEN NULL ELSE j.id END, 'queued', 0, 0, {NOW}
  FROM {from_json("%(rows)s", JOB_ROW_COLUMNS)}
RETURNING id, job_id, CAST(enqueued_at AS CHAR), ready
"""


def demote(other_than: str) -> str:
    """The queue ``%(queue)s``'s ready jobs but ``other_than`` (an id) lose their ready
    flag: a head another took the place of. Through the ``(queue, ready)`` index: left to
    itself, the optimizer weighs a dozen indexes on ``queue`` and ``state`` first, which
    costs more than the update."""
    return f"""
UPDATE watchdog_job FORCE INDEX (watchdog_job_ready) SET ready = FALSE
 WHERE queue = %(queue)s AND ready = TRUE AND cancellation_id IS NULL AND id <> {other_than}
"""


#: ``ENTER_JOB``'s first step: create the queue, or lock its row if it exists (a duplicate
#: key locks the row it meets). Only for a row that existed does the update clause run: it
#: notes so in ``@watchdog_queue_held`` (set false just before) and writes the same name,
#: which writes nothing. A concurrent creator waits for ours, then locks the row ours
#: committed: never 1062.
HOLD_QUEUE = """
INSERT INTO watchdog_queue (name, created_at) VALUES (%(queue)s, %(created_at)s)
    ON DUPLICATE KEY UPDATE name = IF(@watchdog_queue_held := TRUE, name, name)
"""
#: Whether the job becomes the head of its queue, which existed (a queue ``HOLD_QUEUE``
#: created holds nothing else: its job is its head), as ``refresh_head`` would decide once
#: it is in: nothing runs or waits to retry there, and no queued job ranks at least as high
#: (older jobs win ties, and every job there is older). Read after the lock, so at READ
#: COMMITTED it sees what the lock's previous holder committed. Each probe names its index,
#: which makes it a dive into the queue's entries: the optimizer's weighing of the table's
#: other indexes on these columns costs the server more than the probes.
PROMOTED = """
SET promoted = NOT EXISTS (
        SELECT 1 FROM watchdog_job FORCE INDEX (watchdog_job_head)
         WHERE queue = %(queue)s
           AND (state = 'running'
                OR state = 'queued' AND `delayed` = FALSE AND priority >= %(priority)s))
    AND NOT EXISTS (
        SELECT 1 FROM watchdog_job FORCE INDEX (watchdog_job_retrying)
         WHERE queue = %(queue)s AND state = 'queued' AND retry_at IS NOT NULL)
"""
#: The id ``INSERT_JOB`` drew, in the same session.
LAST_ID = "PREVIOUS VALUE FOR watchdog_job_id_seq"
INSERT_JOB = insert_job_rows(job_row("promoted"))
#: Errors that may have rolled back the caller's whole transaction, savepoints and all: a
#: deadlock (its victim's), and a lock wait that ran out where ``innodb_rollback_on_timeout``
#: is on (off, the default, it rolls back the one statement, as the steps' way leaves it).
#: The block then goes to no savepoint: it passes the error on as it came.
TRANSACTION_MAY_BE_GONE = f"DECLARE EXIT HANDLER FOR {DEADLOCK}, {LOCK_WAIT_TIMEOUT} RESIGNAL;"


def enter_job_block(begin: str, undo: str, end: str, passed_on: str = "") -> str:
    """``HOLD_QUEUE``, then into a queue that existed ``PROMOTED``, ``INSERT_JOB``, and the
    demotion of a head the job displaced, in one anonymous block between ``begin`` and
    ``end``; an error runs ``undo`` first, but for the errors the handler ``passed_on``
    declares. A delayed job is never promoted. Only ``INSERT_JOB`` sends rows (its
    ``RETURNING``)."""
    return f"""
BEGIN NOT ATOMIC
    DECLARE promoted BOOLEAN DEFAULT NOT %(delayed)s;
    {passed_on}
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN {undo}; RESIGNAL; END;
    {begin};
    SET @watchdog_queue_held = FALSE;
    {HOLD_QUEUE};
    IF promoted AND @watchdog_queue_held THEN {PROMOTED}; END IF;
    {INSERT_JOB};
    IF promoted AND @watchdog_queue_held THEN {demote(LAST_ID)}; END IF;
    {end};
END
"""


#: One job inside the caller's transaction: under a savepoint of its own.
ENTER_JOB = enter_job_block(
    "SAVEPOINT watchdog_enqueue",
    "ROLLBACK TO SAVEPOINT watchdog_enqueue",
    "RELEASE SAVEPOINT watchdog_enqueue",
    TRANSACTION_MAY_BE_GONE,
)
#: One job for a caller in autocommit: a transaction of its own.
ENTER_JOB_ALONE = enter_job_block("START TRANSACTION", "ROLLBACK", "COMMIT")


@lru_cache(maxsize=128)
def existing_job_ids(job_ids: str) -> str:
    return f"SELECT job_id FROM watchdog_job WHERE {job_ids}"


def enter_jobs(
    dialect: MariadbDialect, batch: Sequence[NewJob], delays: Sequence[bool], now: datetime
) -> tuple[list[Row], set[str], dict[int, bool]]:
    """Hold (lock or create) the batch's queues in name order, insert the jobs whose
    ids are new, and settle the heads of the queues that existed.

    One job is one statement (``ENTER_JOB``), unless its id is taken: the block undid its
    writes, and the steps answer the repeat. The queues created are named for a repeat's
    undoing only (``store.enqueue``): ``ENTER_JOB`` takes none, so it names none.

    A repeated id is never inserted: one stored before is left out; one a concurrent
    transaction inserts (uncommitted) makes the insert wait, then fail with 1062 once
    it commits, upon which the stored ids are read again and the rest inserted (the
    failed statement alone is rolled back). Nothing uses ``INSERT IGNORE``.
    """
    if len(batch) == 1 and waits.limit() is None:
        try:
            return enter_job(dialect, ENTER_JOB, batch[0], delays[0], now), set(), {}
        except IntegrityError as error:
            if error_code(error) != DUPLICATE_KEY:
                raise
    return _enter_in_steps(dialect, batch, delays, now)


def enter_job_alone(
    dialect: MariadbDialect, new: NewJob, delayed: bool, now: datetime
) -> list[Row] | None:
    """``ENTER_JOB_ALONE``, for a caller in autocommit: the row inserted, none if the id
    was taken. ``None`` (nothing written) where the steps must run instead: a bounded
    block (``waits``), an id the sequence gave that a row has (``_pass_every_stored_id``),
    a deadlock (``enqueue_many`` runs its transaction again)."""
    if waits.limit() is not None:
        return None
    try:
        return enter_job(dialect, ENTER_JOB_ALONE, new, delayed, now)
    except IntegrityError as error:
        if error_code(error) != DUPLICATE_KEY:
            raise
        return None if _on_the_primary_key(error) else []
    except DatabaseError as error:
        if error_code(error) != DEADLOCK:
            raise
        return None


#: The block as the procedure migration ``0015_mariadb_enter_job`` stores it (parsed once
#: per connection, where the server parses a block on every call): ``%(alone)s`` picks
#: ``ENTER_JOB_ALONE``'s form or ``ENTER_JOB``'s.
CALL_ENTER_JOB = """
CALL watchdog_enter_job(
    %(alone)s, %(job_id)s, %(queue)s, %(lane)s, %(priority)s, %(payload)s, %(max_recoveries)s,
    %(delayed)s, %(run_after)s, %(retry_policy)s, %(timeout)s, %(trace_context)s, %(created_at)s)
"""
#: Why a ``CALL`` found no procedure to run, whereupon the block runs instead: it does not
#: exist (a database built from the models, a dump without its routines), the user may not
#: execute it, or it takes other arguments (the code is newer than the migrations applied).
NO_PROCEDURE = (1305, 1370, 1318)


def enter_job(
    dialect: MariadbDialect, block: str, new: NewJob, delayed: bool, now: datetime
) -> list[Row]:
    """Run ``block`` (``ENTER_JOB`` or ``ENTER_JOB_ALONE``) for ``new``, as the procedure
    where the connection has it: its row. A ``CALL`` that finds no procedure ran nothing
    (the caller's transaction is as it was); the connection then sends the block."""
    params = {
        **dialect.job_values(new, delayed),
        "created_at": dialect.param_datetime(now),
        "alone": block is ENTER_JOB_ALONE,
    }
    connection = dialect.connection
    connection.ensure_connection()
    # Kept per connection to the server (``connection.connection``): a new one asks again.
    if getattr(connection, "_watchdog_without_procedure", None) is not connection.connection:
        try:
            return [tuple(row) for row in dialect.fetch_block(CALL_ENTER_JOB, params)]
        except DatabaseError as error:
            if error_code(error) not in NO_PROCEDURE:
                raise
            connection._watchdog_without_procedure = connection.connection
    return [tuple(row) for row in dialect.fetch_block(block, params)]


def _enter_in_steps(
    dialect: MariadbDialect, batch: Sequence[NewJob], delays: Sequence[bool], now: datetime
) -> tuple[list[Row], set[str], dict[int, bool]]:
    """``enter_jobs`` statement by statement (the module docstring's steps)."""
    created = _hold_queues(dialect, sorted({new.queue for new in batch}), now)
    first: dict[str, int] = {}
    for index, new in enumerate(batch):
        first.setdefault(new.job_id, index)
    heads_of_created = best_new_jobs(batch, delays, created)
    wanted = sorted(first.values())
    inserted: list[Row] = []
    for _ in range(ENQUEUE_ATTEMPTS):
        try:
            inserted = _insert(dialect, batch, delays, wanted, heads_of_created)
            break
        except IntegrityError as error:
            if error_code(error) != DUPLICATE_KEY:
                raise
            stored = _stored_ids(dialect, [batch[index].job_id for index in wanted])
            if not stored:
                if not _on_the_primary_key(error):
                    raise
                _pass_every_stored_id(dialect)
            wanted = [index for index in wanted if batch[index].job_id not in stored]
    else:  # pragma: no cover - a repeat raced us ENQUEUE_ATTEMPTS times
        raise IntegrityError("enqueue kept meeting concurrent repeats")
    ready: dict[int, bool] = {}
    by_queue: dict[str, list[int]] = {}
    for pk, job_id, *_ in inserted:
        index = first[job_id]
        if not delays[index] and batch[index].queue not in created:
            by_queue.setdefault(batch[index].queue, []).append(pk)
    for queue, entered in sorted(by_queue.items()):
        head = dialect.refresh_head(queue, entered)
        if head is not None and head[0] != 0 and head[1] in entered:
            ready[head[1]] = True
    return inserted, created, ready


def _hold_queues(dialect: MariadbDialect, queues: Sequence[str], now: datetime) -> set[str]:
    """Lock the existing queues of ``queues`` and create the others; those created."""
    stamp = dialect.param_datetime(now)
    for _ in range(ENQUEUE_ATTEMPTS):
        held = dialect.hold_queues(queues)
        missing = [queue for queue in queues if queue not in held]
        if not missing:
            return set()
        try:
            dialect.execute(CREATE_QUEUES, {"names": one_name_rows(missing), "created_at": stamp})
        except IntegrityError as error:  # created meanwhile: lock it now
            if error_code(error) != DUPLICATE_KEY:
                raise
            continue
        return set(missing)
    raise IntegrityError("enqueue kept meeting concurrent queue creators")  # pragma: no cover


def _insert(
    dialect: MariadbDialect,
    batch: Sequence[NewJob],
    delays: Sequence[bool],
    indexes: Sequence[int],
    heads: set[int],
) -> list[Row]:
    if not indexes:
        return []
    ids = sorted(pk for (pk,) in dialect.fetch(NEW_IDS, {"count": len(indexes)}))
    rows = [
        [pk, *dialect.job_row(batch[index], delays[index]), index in heads]
        for pk, index in zip(ids, indexes, strict=True)
    ]
    inserted = []
    for start in range(0, len(rows), ROWS_PER_INSERT):
        document = json.dumps(rows[start : start + ROWS_PER_INSERT], ensure_ascii=False)
        inserted += dialect.fetch(INSERT_JOBS, {"rows": document})
    stamps = _Stamps()
    return [(pk, job_id, stamps.parsed(at), ready) for pk, job_id, at, ready in inserted]


class _Stamps(dict[str, datetime]):
    """``INSERT_JOBS``'s ``enqueued_at`` texts, each parsed once into the naive ``datetime``
    the driver gives for a ``DATETIME`` column."""

    def parsed(self, text: str) -> datetime:
        if text not in self:
            self[text] = datetime.fromisoformat(text)
        return self[text]


def _on_the_primary_key(error: IntegrityError) -> bool:
    """Whether a duplicate key ``error`` is an id the sequence gave that a row already has."""
    return "for key 'PRIMARY'" in str(error)


def _pass_every_stored_id(dialect: MariadbDialect) -> None:
    """Move the id sequence past every stored id: a row inserted without it (by hand, a
    fixture, a bulk load) took an ``AUTO_INCREMENT`` id the sequence would give again.
    ``SETVAL`` ignores a value the sequence is already past, so racing enqueues agree."""
    ((highest,),) = dialect.fetch(HIGHEST_ID)
    dialect.fetch(pass_id(int(highest)))


def _stored_ids(dialect: MariadbDialect, job_ids: Sequence[str]) -> set[str]:
    clause, params = in_clause("job_id", "job_id", job_ids)
    return {job_id for (job_id,) in dialect.fetch(existing_job_ids(clause), params)}
