"""Fragments every dialect composes its statements from, each written once.

Each is a function of the few words databases spell differently (the clock, a boolean
test), so a dialect builds its statements from these at import and names them as its own.
Parameters are named (``%(name)s``); a fragment documents the names it binds.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

Flag = Callable[[str], str]

#: Every ``watchdog_job`` column, in the model's field order (``rows.job_fields()``; a test
#: keeps the two equal): what a statement that returns jobs returns.
JOB_COLUMNS = (
    "id",
    "job_id",
    "queue",
    "lane",
    "priority",
    "payload",
    "max_recoveries",
    "state",
    "outcome",
    "failure_reason",
    "recovery_count",
    "claim_token",
    "claimed_by",
    "cancellation_id",
    "ready",
    "feed_position",
    "result",
    "traceback",
    "enqueued_at",
    "started_at",
    "settled_at",
    "position",
    "run_after",
    "delayed",
    "retry_at",
    "attempts",
    "retry_policy",
    "timeout",
    "cancellation_requested_by",
    "rerun_of",
    "rerun_requested_by",
    "trace_context",
)


def job_columns(alias: str = "") -> str:
    """The job column list, optionally qualified by a table alias."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + column for column in JOB_COLUMNS)


#: A queued job ``j`` is due: not waiting to retry, or its retry time (``%(now)s``) came, or
#: it carries a cancellation (it settles at once).
DUE = "(j.retry_at IS NULL OR j.retry_at <= %(now)s OR j.cancellation_id IS NOT NULL)"

#: A ready flag set by hand beside a running job of its queue is skipped, never claimed
#: into a second run (one probe of the one-running-per-queue index). A cancelled job
#: settles unrun, so it may go beside one. Two ready jobs of one queue in a claim: only
#: the better is taken (``nth_of_queue``); the queue's next settle puts the flags right.
BESIDE_NOTHING_RUNNING = """(j.cancellation_id IS NOT NULL OR NOT EXISTS (
        SELECT 1 FROM watchdog_job r WHERE r.queue = j.queue AND r.state = 'running'))"""


def claimable(is_set: Flag, lanes: str) -> str:
    """The queue-head rule for claims: ready, in the partition (``lanes``), due, and
    beside nothing running of its queue."""
    return f"{is_set('j.ready')} AND {lanes} AND {DUE} AND {BESIDE_NOTHING_RUNNING}"


#: The candidates a claim ranks: each ready job's queue, rank and whether it was cancelled.
CANDIDATE_COLUMNS = (
    "j.id, j.queue, j.priority, j.position, j.cancellation_id IS NOT NULL AS cancelled"
)


def picked(candidates: str, also: str = "") -> str:
    """Of the ``candidates`` rows (a table expression of ``CANDIDATE_COLUMNS``), the ones a
    claim takes (``n``: rank in the claim): every cancelled one, and the best other job of
    each queue. ``also`` names more columns of ``candidates`` to pass on (``, col``)."""
    return f"""
    SELECT id, cancelled, row_number() OVER () AS n{also} FROM (
        SELECT id, cancelled{also},
               row_number() OVER (PARTITION BY queue, cancelled ORDER BY priority DESC, position)
                   AS nth_of_queue
          FROM {candidates}) AS ranked
     WHERE cancelled OR nth_of_queue = 1"""


def candidates(is_set: Flag, lanes: str) -> str:
    """The best claimable jobs of the partition, up to ``%(limit)s``, best first."""
    return f"""
    SELECT {CANDIDATE_COLUMNS}
      FROM watchdog_job j
     WHERE {claimable(is_set, lanes)}
     ORDER BY j.priority DESC, j.position ASC
     LIMIT %(limit)s"""


def claim_set(now: str) -> str:
    """What a claim writes to each ``taken`` row it ``picked``: a cancelled job settles
    ``cancelled`` unrun, any other runs under ``%(token)s.<n>`` for ``%(worker_id)s``."""
    return f"""
    state = CASE WHEN picked.cancelled THEN 'settled' ELSE 'running' END,
    outcome = CASE WHEN picked.cancelled THEN 'cancelled' END,
    ready = FALSE,
    claim_token = CASE WHEN picked.cancelled THEN NULL ELSE %(token)s || '.' || picked.n END,
    claimed_by = CASE WHEN picked.cancelled THEN NULL ELSE %(worker_id)s END,
    started_at = CASE WHEN picked.cancelled THEN taken.started_at ELSE {now} END,
    settled_at = CASE WHEN picked.cancelled THEN {now} END,
    attempts = CASE WHEN picked.cancelled THEN taken.attempts ELSE taken.attempts + 1 END,
    retry_at = NULL
"""


def any_ready(is_set: Flag, lanes: str) -> str:
    """Whether a job of the partition could be claimed now (binds ``now`` and the lanes)."""
    return f"SELECT 1 FROM watchdog_job j WHERE {claimable(is_set, lanes)} LIMIT 1"


#: A running job, as a fence says it (``settle``, ``retry``); a dialect may spell it so no
#: partial index's condition follows from it (``postgres_claims.running_by_job_id``).
RUNNING = "state = 'running'"


def settle(now: str, running: str = RUNNING) -> str:
    """Settle ``%(job_id)s`` for the holder of ``%(claim_token)s``: ``%(outcome)s``,
    ``%(reason)s``, ``%(result)s``, ``%(traceback)s``; a recorded cancellation wins.
    ``running`` says the job is running (``RUNNING``)."""
    return f"""
UPDATE watchdog_job SET
    state = 'settled',
    outcome = CASE WHEN cancellation_id IS NULL THEN %(outcome)s ELSE 'cancelled' END,
    failure_reason = CASE WHEN cancellation_id IS NULL THEN %(reason)s END,
    result = %(result)s,
    traceback = %(traceback)s,
    settled_at = {now}
 WHERE job_id = %(job_id)s AND {running} AND claim_token = %(claim_token)s
RETURNING {job_columns()}
"""


def retry(now: str, running: str = RUNNING) -> str:
    """Put ``%(job_id)s`` back at its queue's head until ``%(retry_at)s`` (fenced by
    ``%(claim_token)s``); a recorded cancellation settles it instead. ``running`` as in
    ``settle``."""
    return f"""
UPDATE watchdog_job SET
    state = CASE WHEN cancellation_id IS NULL THEN 'queued' ELSE 'settled' END,
    outcome = CASE WHEN cancellation_id IS NULL THEN NULL ELSE 'cancelled' END,
    claim_token = CASE WHEN cancellation_id IS NULL THEN NULL ELSE claim_token END,
    claimed_by = CASE WHEN cancellation_id IS NULL THEN NULL ELSE claimed_by END,
    retry_at = CASE WHEN cancellation_id IS NULL THEN %(retry_at)s END,
    ready = cancellation_id IS NULL,
    traceback = %(traceback)s,
    settled_at = CASE WHEN cancellation_id IS NULL THEN NULL ELSE {now} END
 WHERE job_id = %(job_id)s AND {running} AND claim_token = %(claim_token)s
RETURNING {job_columns()}
"""


def settle_set(now: str) -> str:
    """What settling writes to each running job ``j`` from its ``i`` (decision) row; a
    recorded cancellation wins over the handler's outcome."""
    return f"""
        state = 'settled',
        outcome = CASE WHEN j.cancellation_id IS NULL THEN i.outcome ELSE 'cancelled' END,
        failure_reason = CASE WHEN j.cancellation_id IS NULL THEN i.reason END,
        result = i.result,
        traceback = i.traceback,
        settled_at = {now}
"""


#: Why a fenced change found nothing: the job's state, outcome, token and cancellation.
PRIOR = (
    "SELECT state, outcome, claim_token, cancellation_id FROM watchdog_job"
    " WHERE job_id = %(job_id)s"
)


def head(is_unset: Flag, queue: str = "%(queue)s", *, running: bool = True) -> str:
    """The queue-head rule, as one row (rank, id, job_id, cancellation_id, ready, lane) of
    ``queue``: its running job (rank 0), else its job waiting to retry (rank 1, it keeps
    its place), else its best queued job (rank 2) by priority, then position. Delayed jobs
    not yet due are not in the order.

    Without ``running``, the rule as it stands once the queue's running job settles: a
    queue runs one job at a time (a unique index holds it), so a statement that settles
    that job, under the queue's lock, has no other running job to look for (its snapshot
    still shows the settling one)."""
    running_rank = f"""
    SELECT 0 AS rank, id, job_id, cancellation_id, ready, lane
      FROM watchdog_job WHERE queue = {queue} AND state = 'running'
    UNION ALL"""
    return f"""
SELECT rank, id, job_id, cancellation_id, ready, lane FROM ({running_rank if running else ""}
    SELECT * FROM (
        SELECT 1 AS rank, id, job_id, cancellation_id, ready, lane
          FROM watchdog_job WHERE queue = {queue} AND state = 'queued' AND retry_at IS NOT NULL
         LIMIT 1) AS retrying
    UNION ALL
    SELECT * FROM (
        SELECT 2 AS rank, id, job_id, cancellation_id, ready, lane
          FROM watchdog_job WHERE queue = {queue} AND state = 'queued' AND {is_unset("delayed")}
         ORDER BY priority DESC, position ASC
         LIMIT 1) AS best
) AS candidates
ORDER BY rank
LIMIT 1
"""


def next_head(is_unset: Flag, queue: str) -> str:
    """The id of ``queue``'s head if nothing of it runs (an SQL expression, for statements
    that settle several queues' heads at once): ``head`` without its running rank.
    ``queue`` is the column or parameter naming the queue."""
    return f"""COALESCE(
               (SELECT r.id FROM watchdog_job r
                 WHERE r.queue = {queue} AND r.state = 'queued' AND r.retry_at IS NOT NULL
                 LIMIT 1),
               (SELECT b.id FROM watchdog_job b
                 WHERE b.queue = {queue} AND b.state = 'queued' AND {is_unset("b.delayed")}
                 ORDER BY b.priority DESC, b.position ASC
                 LIMIT 1))"""


def due_delayed(is_set: Flag) -> str:
    """Delayed jobs (id, queue) due at ``%(now)s``, oldest due first, up to ``%(limit)s``."""
    return f"""
SELECT id, queue FROM watchdog_job WHERE {is_set("delayed")} AND run_after <= %(now)s
 ORDER BY run_after, id LIMIT %(limit)s
"""


def next_due(is_set: Flag) -> str:
    """When the next delayed job or retry comes due (``NULL`` if none waits)."""
    return f"""
SELECT MIN(due) FROM (
    SELECT MIN(run_after) AS due FROM watchdog_job WHERE {is_set("delayed")}
    UNION ALL
    SELECT MIN(retry_at) FROM watchdog_job WHERE state = 'queued' AND retry_at IS NOT NULL
) AS soonest
"""


@lru_cache(maxsize=64)
def retry_pending(lanes: str) -> str:
    """Whether a job of the partition (``lanes``) waits to be retried."""
    return f"""
SELECT 1 FROM watchdog_job j
 WHERE j.state = 'queued' AND j.retry_at IS NOT NULL AND {lanes}
 LIMIT 1
"""


# worker rows


def heartbeat(now: str) -> str:
    """Stamp worker ``%(worker_id)s`` alive on the database's clock (no row: it was reaped)."""
    return f"UPDATE watchdog_worker SET heartbeat_at = {now} WHERE worker_id = %(worker_id)s"


# the settled feed

CREATE_CLOCK = (
    "INSERT INTO watchdog_feed_clock (id, last_position) VALUES (1, 0) ON CONFLICT (id) DO NOTHING"
)
ADVANCE_CLOCK = (
    "UPDATE watchdog_feed_clock SET last_position = last_position + %(positioned)s WHERE id = 1"
)


def any_unpositioned(is_unset: Flag) -> str:
    return (
        f"SELECT 1 FROM watchdog_job WHERE feed_position IS NULL AND {is_unset('delayed')} LIMIT 1"
    )


@lru_cache(maxsize=64)
def settled_jobs(lanes: str) -> str:
    """The settled jobs after ``%(after)s``, up to the partition's first pending job (the
    horizon; ``%(no_horizon)s`` if none), at most ``%(limit)s``: index range scans on the
    ``watchdog_job_feed_*`` partial indexes, whose predicates the terms repeat. ``lanes``
    (``AND …`` terms) narrows both to a partition."""
    return f"""
SELECT {job_columns()} FROM watchdog_job
 WHERE state = 'settled' AND feed_position IS NOT NULL AND feed_position > %(after)s {lanes}
   AND feed_position < COALESCE(
       (SELECT MIN(feed_position) FROM watchdog_job
         WHERE state IN ('queued', 'running') AND feed_position IS NOT NULL {lanes}),
       %(no_horizon)s)
 ORDER BY feed_position
 LIMIT %(limit)s
"""


# idle task queues (store.idle_queues)

#: A task backend's queue ``q``: its name starts with ``%(task_prefix)s`` (5 characters) or
#: ``%(task_key_prefix)s`` (9), matched by case (``substr``: SQLite's ``LIKE`` ignores it).
TASK_QUEUE = (
    "(substr(q.name, 1, 5) = %(task_prefix)s OR substr(q.name, 1, 9) = %(task_key_prefix)s)"
)


def names_no_job(is_set: Flag, is_unset: Flag) -> str:
    """No job of any state names queue ``q``: ``LIMIT 1`` probes on indexes with the queue
    first, not a ``NOT EXISTS`` the planner could turn into a scan of every job."""
    return f"""
       (SELECT 1 FROM watchdog_job j
         WHERE j.queue = q.name AND j.state = 'queued' AND {is_unset("j.delayed")} LIMIT 1) IS NULL
   AND (SELECT 1 FROM watchdog_job j
         WHERE j.queue = q.name AND j.state = 'queued' AND {is_set("j.delayed")} LIMIT 1) IS NULL
   AND (SELECT 1 FROM watchdog_job j
         WHERE j.queue = q.name AND j.state = 'running' LIMIT 1) IS NULL
   AND (SELECT 1 FROM watchdog_job j
         WHERE j.queue = q.name AND j.state = 'settled' LIMIT 1) IS NULL
"""
