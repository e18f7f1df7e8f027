"""The queues a page shows, read in one statement whatever their number (SQLite, MariaDB).

PostgreSQL reads them with ``LATERAL`` over an array of names (``postgres_claims``). SQLite
and MariaDB have no ``LATERAL``: there the names come as one JSON array parameter, unnested
by the database (``json_each``, ``JSON_TABLE``: ``names``, a query of one ``queue`` per
name, read once as ``shown``), and each figure of a name is a correlated scalar subquery,
one index probe or a read of at most ``cap`` index entries. An arm of ``UNION ALL`` per
queue made 80 KB of SQL for a page of 100 queues, and its counts, composed with the ORM,
about 400 querysets.

MariaDB also refuses an outer reference inside a derived table (so no ``LIMIT`` under a
``COUNT``): it counts a part up to ``cap`` by probing for its ``cap``-th job first
(``LIMIT 1 OFFSET cap - 1``) and counting the part in full only when that probe found none.
"""

from __future__ import annotations

from .common import Flag

#: The name of the shown queue a correlated subquery reads.
QUEUE = "shown.queue"
#: The head rule of ``common.head`` by probes, its rank read back from the job found:
#: running (0), else waiting to retry (1), else the best queued (2).
HEAD_RANK = (
    "CASE WHEN j.state = 'running' THEN 0 WHEN j.retry_at IS NOT NULL THEN 1 ELSE 2 END AS rank"
)


def heads(is_unset: Flag, names: str) -> str:
    """(queue, rank, id, job_id, cancellation_id, ready, lane) of each of ``names`` (a
    query of one ``queue`` per name) whose queue has a head: ``common.head``'s rule, three
    index probes per name."""
    queue = QUEUE
    return f"""
WITH shown AS ({names})
SELECT picked.queue, {HEAD_RANK}, j.id, j.job_id, j.cancellation_id, j.ready, j.lane
  FROM (
    SELECT {queue} AS queue, COALESCE(
        (SELECT id FROM watchdog_job WHERE queue = {queue} AND state = 'running' LIMIT 1),
        (SELECT id FROM watchdog_job
          WHERE queue = {queue} AND state = 'queued' AND retry_at IS NOT NULL LIMIT 1),
        (SELECT id FROM watchdog_job
          WHERE queue = {queue} AND state = 'queued' AND {is_unset("delayed")}
          ORDER BY priority DESC, position ASC LIMIT 1)
    ) AS id
      FROM shown
  ) AS picked
  JOIN watchdog_job j ON j.id = picked.id
"""


def _queued_parts(is_set: Flag, is_unset: Flag) -> tuple[str, str]:
    """The two parts of a shown queue's queued jobs, as ``WHERE`` conditions: waiting in
    its order (the head index), and delayed."""
    queued = f"queue = {QUEUE} AND state = 'queued'"
    return f"{queued} AND {is_unset('delayed')}", f"{queued} AND {is_set('delayed')}"


def _per_state(names: str, queued: tuple[str, str], running: str, settled: str) -> str:
    """(queue, state, jobs, oldest) for each of ``names`` and state, from the expressions
    given (queued: its count and its oldest), the names read once."""
    count, oldest = queued
    return f"""
WITH shown AS ({names})
SELECT shown.queue, 'queued' AS state, {count} AS jobs, {oldest} AS oldest FROM shown
UNION ALL
SELECT shown.queue, 'running', {running}, NULL FROM shown
UNION ALL
SELECT shown.queue, 'settled', {settled}, NULL FROM shown
"""


def exact_capped_counts(is_set: Flag, is_unset: Flag, names: str, cap: int) -> str:
    """Per name of ``names`` and state: its jobs counted up to ``cap`` per part, each part
    read in the order of the index that serves it, and the earliest enqueued of the queued
    ones read (as PostgreSQL's ``capped_counts``), where a derived table may refer to the
    outer row (SQLite)."""
    limit, queue = int(cap), QUEUE
    waiting, delayed = _queued_parts(is_set, is_unset)
    queued = f"""(
        SELECT * FROM (SELECT enqueued_at FROM watchdog_job WHERE {waiting}
                        ORDER BY priority DESC, position ASC LIMIT {limit})
        UNION ALL
        SELECT * FROM (SELECT enqueued_at FROM watchdog_job WHERE {delayed}
                        ORDER BY run_after LIMIT {limit}))"""
    running = f"""(SELECT COUNT(*) FROM (
        SELECT 1 FROM watchdog_job WHERE queue = {queue} AND state = 'running' LIMIT {limit}))"""
    settled = f"""(SELECT COUNT(*) FROM (
        SELECT 1 FROM watchdog_job WHERE queue = {queue} AND state = 'settled'
         ORDER BY position DESC LIMIT {limit}))"""
    return _per_state(
        names,
        (f"(SELECT COUNT(*) FROM {queued})", f"(SELECT MIN(enqueued_at) FROM {queued})"),
        running,
        settled,
    )


def probed_capped_counts(is_set: Flag, is_unset: Flag, names: str, cap: int) -> str:
    """``exact_capped_counts`` without derived tables (MariaDB): a part's count is ``cap``
    if its ``cap``-th job exists (a read of ``cap`` index entries), else the part counted in
    full (fewer than ``cap``). Its oldest is exact below the cap; past it, the part's first
    job in the head index's order (priority, then place, then id: waiting, the next to run),
    the earliest enqueued when priorities are equal."""
    limit, queue = int(cap), QUEUE
    waiting, delayed = _queued_parts(is_set, is_unset)
    order = "ORDER BY priority DESC, position ASC, id ASC"

    def capped(where: str) -> str:
        return (
            f"COALESCE((SELECT {limit} FROM watchdog_job WHERE {where} LIMIT 1 OFFSET {limit - 1}),"
            f" (SELECT COUNT(*) FROM watchdog_job WHERE {where}))"
        )

    def oldest(where: str) -> str:
        return (
            f"CASE WHEN (SELECT 1 FROM watchdog_job WHERE {where} LIMIT 1 OFFSET {limit - 1})"
            f" IS NULL THEN (SELECT MIN(enqueued_at) FROM watchdog_job WHERE {where})"
            f" ELSE (SELECT enqueued_at FROM watchdog_job WHERE {where} {order} LIMIT 1) END"
        )

    first, second = oldest(waiting), oldest(delayed)
    return _per_state(
        names,
        (
            f"({capped(waiting)} + {capped(delayed)})",
            f"COALESCE(LEAST({first}, {second}), {first}, {second})",
        ),
        f"(SELECT COUNT(*) FROM watchdog_job WHERE queue = {queue} AND state = 'running')",
        capped(f"queue = {queue} AND state = 'settled'"),
    )
