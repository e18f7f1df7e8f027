"""MariaDB's enqueue: hold the queues, insert the new ids, settle the heads.

1. the batch's queues, locked in name order (``lock_queues``), the missing ones inserted; a
   concurrent creator makes that insert wait, then fail with 1062: the step is repeated;
2. the jobs inserted with ``INSERT … RETURNING`` (MariaDB 10.5), each taking its id from the
   job id sequence (``NEXT_ID``, in row order) and, unless delayed, that id as its place in
   the order, as on PostgreSQL;
3. the heads of the queues that existed settled (``refresh_head``); a created queue's head
   is its best new job, decided before the insert.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError

from .base import Row, in_clause
from .mariadb_terms import DUPLICATE_KEY, NEXT_ID, NOW, error_code, quoted
from .new_heads import best_new_jobs

if TYPE_CHECKING:
    from ..enqueue import NewJob
    from .mariadb import MariadbDialect

#: Times an enqueue re-reads and retries after a concurrent creator's duplicate key.
ENQUEUE_ATTEMPTS = 8

CREATE_QUEUE_ROW = ("name", "created_at")
INSERT_JOB_ROW = (
    "job_id", "queue", "lane", "priority", "payload", "max_recoveries", "delayed", "run_after",
    "retry_policy", "timeout", "trace_context", "ready",
)  # fmt: skip


#: The highest id stored (``_pass_every_stored_id``).
HIGHEST_ID = "SELECT COALESCE(MAX(id), 0) FROM watchdog_job"


def pass_id(highest: int) -> str:
    """Set the id sequence to give ids above ``highest`` next (``SETVAL`` takes a literal)."""
    return f"SELECT SETVAL(watchdog_job_id_seq, {int(highest)})"


def values(names: Sequence[str], count: int) -> str:
    """Placeholders ``(…), (…)`` for ``count`` rows of ``names`` (``<name>_<n>``)."""
    return ", ".join(
        "(" + ", ".join(f"%({name}_{n})s" for name in names) + ")" for n in range(count)
    )


@lru_cache(maxsize=128)
def create_queues(count: int) -> str:
    """Insert ``count`` queues; a concurrent creator makes it wait, then fail (1062)."""
    return f"INSERT INTO watchdog_queue (name, created_at) VALUES {values(CREATE_QUEUE_ROW, count)}"


@lru_cache(maxsize=128)
def insert_jobs(count: int) -> str:
    """Insert ``count`` jobs, each ``ready`` as given, their ids drawn from the job id
    sequence in row order. A job in its queue's order takes its id as its position (a
    value refers to the row's columns set before it); a delayed job has none yet."""
    columns = ", ".join(quoted(name) for name in INSERT_JOB_ROW)
    rows = ", ".join(
        f"({NEXT_ID}, "
        + ", ".join(f"%({name}_{n})s" for name in INSERT_JOB_ROW)
        + f", CASE WHEN %(delayed_{n})s THEN NULL ELSE id END, 'queued', 0, 0, {NOW})"
        for n in range(count)
    )
    return f"""
INSERT INTO watchdog_job
    (id, {columns}, position, state, recovery_count, attempts, enqueued_at)
VALUES {rows}
RETURNING id, job_id, enqueued_at, ready
"""


@lru_cache(maxsize=128)
def existing_job_ids(job_ids: str) -> str:
    return f"SELECT job_id FROM watchdog_job WHERE {job_ids}"


def enter_jobs(
    dialect: MariadbDialect, batch: Sequence[NewJob], delays: Sequence[bool], now: datetime
) -> tuple[list[Row], set[str], dict[int, bool]]:
    """Hold (lock or create) the batch's queues in name order, insert the jobs whose
    ids are new, and settle the heads of the queues that existed.

    A repeated id is never inserted: one stored before is left out; one a concurrent
    transaction inserts (uncommitted) makes the insert wait, then fail with 1062 once
    it commits, upon which the stored ids are read again and the rest inserted (the
    failed statement alone is rolled back). Nothing uses ``INSERT IGNORE``.
    """
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
        rows = {}
        for n, queue in enumerate(missing):
            rows.update({f"name_{n}": queue, f"created_at_{n}": stamp})
        try:
            dialect.execute(create_queues(len(missing)), rows)
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
    params: dict[str, Any] = {}
    for n, index in enumerate(indexes):
        row = {**dialect.job_values(batch[index], delays[index]), "ready": index in heads}
        params.update({f"{name}_{n}": value for name, value in row.items()})
    inserted = dialect.fetch(insert_jobs(len(indexes)), params)
    return [(pk, job_id, at, ready) for pk, job_id, at, ready in inserted]


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
