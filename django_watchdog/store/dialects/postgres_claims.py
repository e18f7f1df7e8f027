"""PostgreSQL, the hot path: the clock, queue locks, claim, settle and queue heads.

Many workers claim at once: a change to a queue first locks its ``watchdog_queue`` row (in
name order when several), claims skip locked queues (``SKIP LOCKED``), and whatever makes a
job ready sends ``NOTIFY`` inside its transaction, so idle workers wake at commit. PostgreSQL
folds ``x = TRUE`` into ``x``, the form of its partial-index predicates (``Dialect.is_set``).
Part of ``PostgresDialect`` (``dialects.postgres``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from ...conf import setting
from .. import waits
from . import common
from .base import WAKE_EVERY_LANE, Dialect, LaneTerms, Params, QuietLanes, Row

#: The database's clock: every job timestamp PostgreSQL writes.
NOW = "clock_timestamp()"
#: The job id sequence's next value. The sequence is looked up in a scalar subquery, run
#: once per statement: ``pg_get_serial_sequence`` is ``STABLE``, so called as ``nextval``'s
#: argument it ran for every row, a catalog search each (2.5 µs a row: a tenth of the
#: server's time in a bulk enqueue).
NEXT_JOB_ID = "nextval((SELECT pg_get_serial_sequence('watchdog_job', 'id')::regclass))"
is_set = Dialect.is_set
is_unset = Dialect.is_unset

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
#: The lane a walk of a partition of several lanes is on: ``claim`` walks them one at a
#: time, each lane's value from a ``VALUES`` list (``served``).
EACH_SERVED_LANE = "j.lane = served.lane"
#: Whether a head made ready goes unannounced (``QuietLanes``): its lane is one of
#: ``%(quiet_lanes)s``, or any lane but ``%(quiet_all_but)s`` where that is set (NULL: none).
QUIET = """(watchdog_job.lane = ANY(%(quiet_lanes)s::text[])
           OR watchdog_job.lane <> ALL(%(quiet_all_but)s::text[]))"""

# worker rows

HEARTBEAT = common.heartbeat(NOW)
#: The same, first bounding lock waits for the rest of the transaction (in autocommit,
#: this statement's): a bounded heartbeat in one round trip. The row is updated above the
#: join, so ``bound`` is evaluated before its lock is waited for.
HEARTBEAT_BOUNDED = f"""
WITH bound AS MATERIALIZED (SELECT set_config('lock_timeout', %(lock_timeout)s, true) AS t)
UPDATE watchdog_worker SET heartbeat_at = {NOW} FROM bound WHERE worker_id = %(worker_id)s
"""

# claim, settle


@lru_cache(maxsize=64)
def claim(lanes: LaneTerms, limit: int) -> str:
    """Take the best ready jobs of the partition in one statement; each candidate's queue
    row is locked with SKIP LOCKED, so concurrent claimers spread over queues instead of
    waiting on each other.

    Having taken none, it returns one row of NULLs if its snapshot showed a claimable job
    all the same (its queue was locked, or another claim took it first): worth another
    try. No row at all: nothing of the partition was claimable.

    Each picked job is updated by its address (``ctid``, a TID scan), never found again
    through an index: a queue's table changes faster than its statistics, and a planner
    that believes no job is queued would walk every queued or ready job to find it. Under
    ``READ COMMITTED`` a row updated meanwhile is followed to its newest version, whose
    ``ready`` and ``state`` are checked again.

    ``limit`` is written into the statement, not bound: PostgreSQL plans a prepared
    statement afresh on every run while the plan it would reuse costs more than the first
    runs' plans, and a plan that cannot know the limit does. With fresh statistics of a
    backlog, that was every claim (1.7 ms more per job of the default worker).

    A partition of several served lanes (as the default worker's: every lane with a
    handler) is walked a lane at a time, each in its claim index's order, and the
    best of each lane's best kept. No index gives the jobs of several lanes in claim
    order: on a table never analyzed (a new install's) the plan read every ready job of
    the lanes, joined each to its queue and sorted them, per claim (the default worker
    with two lanes cost the server 1.4 to 1.8 ms a job where one lane cost 0.7 to 0.9).
    The lanes' values come from a ``VALUES`` list, whose length the plan knows: from a
    bound array, PostgreSQL planned the claim afresh on every run. Each lane's walk
    locks the queues of its best jobs, up to ``limit`` per lane; those the claim does not
    take stay locked until it commits.
    """
    if limit < 1:
        raise ValueError(f"a claim takes at least one job, not {limit}")
    if lanes.served > 1:
        values = ", ".join(f"(%({name})s)" for name in lanes.served_names)
        each = lanes.predicate(served=EACH_SERVED_LANE)
        candidates = f"""
    SELECT best.* FROM (VALUES {values}) AS served(lane)
    CROSS JOIN LATERAL ({_candidates(each, limit)}
    ) AS best
     ORDER BY best.priority DESC, best.position ASC
     LIMIT {int(limit)}"""
        probe = f"""SELECT 1 FROM (VALUES {values}) AS served(lane)
    CROSS JOIN LATERAL ({common.any_ready(is_set, each)}) AS found LIMIT 1"""
    else:
        predicate = lanes.predicate()
        candidates, probe = _candidates(predicate, limit), common.any_ready(is_set, predicate)
    return f"""
WITH candidate AS ({candidates}
),
picked AS ({_picked(limit)}),
claimed AS (
    UPDATE watchdog_job AS taken SET {common.claim_set(NOW)}
      FROM picked
     WHERE taken.ctid = picked.address
       AND taken.id = picked.id AND taken.ready = TRUE AND taken.state = 'queued'
    RETURNING {common.job_columns("taken")}
)
SELECT claimed.* FROM (VALUES (1)) AS one LEFT JOIN claimed ON TRUE
 WHERE claimed.id IS NOT NULL OR EXISTS ({probe})
"""


def _picked(limit: int) -> str:
    """``common.picked`` of the candidates, with their addresses. A claim of one has one
    candidate at most, which it takes (cancelled or not, it is the best of its queue):
    no ranking, whose two window aggregates and sort PostgreSQL sets up on every run."""
    if limit == 1:
        return "SELECT id, cancelled, 1 AS n, address FROM candidate"
    return common.picked("candidate", also=", address")


def _queue_of_candidate(limit: int) -> str:
    """How a claim of ``limit`` jobs finds each candidate's queue row (``q`` of ``j``).

    For one job, by a condition no merge or hash join takes (the same row as the
    equality), so the queue is probed by its name for each job as the walk of a claim index
    meets it, and the walk stops at the first it can lock. Statistics gathered when no job
    was ready call the claim indexes empty: with the equality, the planner read every ready
    job, sorted them by queue to merge them with the queue table and sorted them again, in
    every claim. For several, by the equality: where the planner reads every ready job
    anyway (expecting fewer claimable jobs than it takes), a hash join reads each table
    once, where the probe's condition compared every job with every queue."""
    return "q.name = ANY(ARRAY[j.queue])" if limit == 1 else "q.name = j.queue"


def _candidates(lanes: str, limit: int) -> str:
    """The best claimable jobs of ``lanes``, up to ``limit``, their queues locked."""
    return f"""
    SELECT {common.CANDIDATE_COLUMNS}, j.ctid AS address
      FROM watchdog_job j
      JOIN watchdog_queue q ON {_queue_of_candidate(limit)}
     WHERE {common.claimable(is_set, lanes)}
     ORDER BY j.priority DESC, j.position ASC
     LIMIT {int(limit)}
       FOR UPDATE OF q SKIP LOCKED"""


def running_by_job_id(state: str = "state") -> str:
    """A settle's or a retry's fence on the job's ``state``, compared in a collation no
    partial index's condition has, so that no such index follows from it: statistics
    gathered when no job ran call the running jobs' indexes empty, and the planner walked
    every running job in one of them rather than probe the job's id. (The same test:
    equality is exact in every deterministic collation.)"""
    return f"{state} = 'running' COLLATE \"C\""


SETTLE = common.settle(NOW, running_by_job_id())
RETRY = common.retry(NOW, running_by_job_id())
PRIOR = common.PRIOR

# queue heads

HEAD = common.head(is_unset)


def displaced(queue: str, also: str = "") -> str:
    """The id of the head a new head of ``queue`` displaces, as a scalar subquery: the
    queue's best queued job (``also`` leaves some out), since no job runs or waits to retry
    there when a new job takes the head.

    The ``head`` index's first entry for the queue (``LIMIT 1``), whatever the statistics
    say: a statement that asked for the queue's ready job let the planner walk every ready
    job in a claim index when statistics gathered with none ready called those indexes
    empty. The caller updates the row by this id (``id = ANY(ARRAY(...))``, computed once
    before the update runs), so the update is a probe of the primary key even in a plan
    made while the table was small, where a join on the id was a scan of the whole table;
    and by id, not by address, so a row a writer without the queue's lock changed meanwhile
    (a feed read numbering it) is still updated, in its new version."""
    return f"""(
        SELECT r.id FROM watchdog_job r
         WHERE r.queue = {queue} AND r.state = 'queued' AND r.delayed = FALSE{also}
         ORDER BY r.priority DESC, r.position
         LIMIT 1)"""


def refresh(head: str, only_if: str = "", *, displaces: bool = True) -> str:
    """Common table expressions that make ``head`` (a ``common.head`` row) ready and waken
    its lane's workers (unless ``QUIET``), and, with ``displaces``, take the
    ready flag from the head it displaced if ``head`` is one of ``%(entered)s``; ``only_if``
    makes it conditional."""
    demoted = f""",
demoted AS (
    UPDATE watchdog_job SET ready = FALSE FROM head
     WHERE watchdog_job.id = {displaced("%(queue)s", " AND r.id <> ALL(%(entered)s::bigint[])")}
       AND watchdog_job.cancellation_id IS NULL
       AND head.rank <> 0 AND head.id = ANY(%(entered)s::bigint[])
    RETURNING 1
)"""
    return f"""
head AS ({head}),
marked AS (
    UPDATE watchdog_job SET ready = TRUE FROM head
     WHERE watchdog_job.id = head.id AND head.rank <> 0 AND NOT watchdog_job.ready {only_if}
    RETURNING CASE WHEN {QUIET} THEN NULL ELSE pg_notify(%(channel)s, watchdog_job.lane) END
){demoted if displaces else ""}
"""


#: The head of each of ``%(queues)s``, in one statement whatever their number: each
#: queue's head query beside it (``LATERAL``), prepared and planned once. An arm of
#: ``UNION ALL`` per queue made 80 KB of SQL for a page of 100 queues, planned on every read.
HEADS_OF_QUEUES = f"""
SELECT shown.queue, h.* FROM unnest(%(queues)s::text[]) AS shown(queue)
CROSS JOIN LATERAL ({common.head(is_unset, queue="shown.queue")}) AS h
"""


@lru_cache(maxsize=4)
def capped_counts(cap: int) -> str:
    """Per queue of ``%(queues)s`` and state, its jobs counted up to ``cap`` per part, each
    part read in the order of the index that serves it (queued: the queue's order, then
    its delayed jobs by due time; settled: the queue's latest), and the earliest enqueued
    of the queued ones read; one statement whatever the number of queues."""
    limit = int(cap)
    return f"""
SELECT shown.queue, c.state, c.jobs, c.oldest FROM unnest(%(queues)s::text[]) AS shown(queue)
CROSS JOIN LATERAL (
    SELECT 'queued' AS state, COUNT(*) AS jobs, MIN(enqueued_at) AS oldest FROM (
        (SELECT enqueued_at FROM watchdog_job
          WHERE queue = shown.queue AND state = 'queued' AND NOT delayed
          ORDER BY priority DESC, position LIMIT {limit})
        UNION ALL
        (SELECT enqueued_at FROM watchdog_job
          WHERE queue = shown.queue AND state = 'queued' AND delayed
          ORDER BY run_after LIMIT {limit})
    ) AS queued
    UNION ALL
    SELECT 'running', COUNT(*), NULL FROM (
        SELECT 1 FROM watchdog_job WHERE queue = shown.queue AND state = 'running' LIMIT {limit}
    ) AS running
    UNION ALL
    SELECT 'settled', COUNT(*), NULL FROM (
        SELECT 1 FROM watchdog_job WHERE queue = shown.queue AND state = 'settled'
         ORDER BY position DESC LIMIT {limit}
    ) AS settled
) AS c
"""


#: The head, its ready flag and the displaced head's, in one round trip.
REFRESH_HEAD = f"WITH {refresh(HEAD)} SELECT * FROM head"
#: Settle, pick the settled job's queue's next head and mark it ready, in one round trip.
#: The head query reads no running job: the settling job was its queue's only one (its
#: snapshot still shows it running); every other row of the queue is current because the
#: queue's lock is held (taken by an earlier statement). The queue is the settled row's:
#: the statement needs nothing the lock's answer says, so both can go to the server
#: together (``settle_and_claim_alone``). A settle enters no job, so the head it readies
#: displaces none: no update for that (each one a statement carries costs PostgreSQL its
#: set-up on every run, used or not).
SETTLE_AND_REFRESH = f"""
WITH settled AS ({SETTLE}),
{
    refresh(
        common.head(is_unset, queue="(SELECT queue FROM settled)", running=False),
        only_if="AND EXISTS (SELECT 1 FROM settled)",
        displaces=False,
    )
}
SELECT settled.*, head.* FROM settled LEFT JOIN head ON TRUE
"""

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
     WHERE j.job_id = i.job_id AND {running_by_job_id("j.state")} AND j.claim_token = i.token
    RETURNING {common.job_columns("j")}
),
head AS (
    SELECT h.* FROM (SELECT DISTINCT queue FROM settled) AS s
    CROSS JOIN LATERAL ({common.head(is_unset, queue="s.queue", running=False)}) AS h
),
marked AS (
    UPDATE watchdog_job SET ready = TRUE FROM head
     WHERE watchdog_job.id = head.id AND head.rank <> 0 AND NOT watchdog_job.ready
    RETURNING CASE WHEN {QUIET} THEN NULL ELSE pg_notify(%(channel)s, watchdog_job.lane) END
)
SELECT * FROM settled
"""
SETTLE_MANY_COLUMNS = ("job_id", "token", "outcome", "reason", "result", "traceback")


def lock_queue_of_job(job_id: str) -> tuple[str, Params]:
    """The statement that locks the queue of ``job_id``, bounded as the caller is, and its
    parameters."""
    if (seconds := waits.limit()) is not None:
        return LOCK_QUEUE_OF_JOB_BOUNDED, {
            "lock_timeout": waits.milliseconds(seconds),
            "job_id": job_id,
        }
    return LOCK_QUEUE_OF_JOB, {"job_id": job_id}


def quiet_params(quiet: QuietLanes) -> Params:
    """``QUIET``'s parameters, and the channel it would notify on."""
    but = quiet.every_lane_but
    return {
        "quiet_lanes": list(quiet.only),
        "quiet_all_but": None if but is None else list(but),
        "channel": setting("NOTIFY_CHANNEL"),
    }


def settle_and_refresh(params: Params, quiet: QuietLanes) -> tuple[str, Params]:
    """``SETTLE_AND_REFRESH`` with ``SETTLE``'s parameters and the lanes it wakes none of."""
    return SETTLE_AND_REFRESH, {**params, **quiet_params(quiet)}


def settled_and_head(found: Sequence[Row]) -> tuple[Row, Row | None] | None:
    """``SETTLE_AND_REFRESH``'s answer: the settled row and its queue's head row (``None``:
    idle); ``None`` if the fenced update changed nothing."""
    from ..rows import job_fields

    if not found:
        return None
    width = len(job_fields())
    head = found[0][width:]
    return found[0][:width], (None if head[0] is None else head)


class PostgresClaims(Dialect):
    """PostgreSQL's locks, claim, settle and queue heads (a part of ``PostgresDialect``)."""

    NOW = NOW
    SETTLE, RETRY, PRIOR, HEAD = SETTLE, RETRY, PRIOR, HEAD
    HEARTBEAT = HEARTBEAT

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
        rows = self.fetch(*lock_queue_of_job(job_id))
        return str(rows[0][0]) if rows else None

    def heartbeat(self, worker_id: str) -> bool:
        """Stamp the worker alive in one round trip, bounded as the caller is."""
        if (seconds := waits.limit()) is None:
            return super().heartbeat(worker_id)
        params = {"lock_timeout": waits.milliseconds(seconds), "worker_id": worker_id}
        return self.execute(HEARTBEAT_BOUNDED, params) > 0

    def notify(self, lane: str) -> None:
        """Wake idle workers of ``lane`` once this transaction commits."""
        self.fetch(NOTIFY, {"channel": setting("NOTIFY_CHANNEL"), "lane": lane})

    # the steps verbs take

    def claim_sql(self, lanes: LaneTerms, limit: int) -> str:
        return claim(lanes, limit)

    def settle_and_refresh(
        self, params: Params, queue: str, quiet: QuietLanes
    ) -> tuple[Row, Row | None] | None:
        """Settle (``SETTLE``'s parameters), pick the queue's next head and mark it ready
        (waking its lane unless ``quiet``), in one round trip."""
        return settled_and_head(self.fetch(*settle_and_refresh(params, quiet)))

    def settle_and_claim_alone(
        self, params: Params, quiet: QuietLanes, lanes: LaneTerms, claim_params: Params
    ) -> tuple[tuple[Row, Row | None] | None, list[Row]] | None:
        """Lock the settling job's queue, settle it and ready the queue's next head
        (``settle_and_refresh``), then claim (``claim``): the three statements sent
        together (``fetch_pipelined``), one exchange and one implicit transaction, which the
        server commits on its own; each statement starts once the one before has finished,
        so the settle's snapshot follows the lock. ``None`` where they cannot go together
        (``pipelined``): nothing was sent."""
        if not self.pipelined():
            return None
        _, settled, claimed = self.fetch_pipelined(
            [
                lock_queue_of_job(str(params["job_id"])),
                settle_and_refresh(params, quiet),
                (claim(lanes, int(claim_params["limit"])), claim_params),
            ]
        )
        return settled_and_head(settled), claimed

    def heads_statement(self, queues: Sequence[str]) -> tuple[str, Params]:
        return HEADS_OF_QUEUES, {"queues": list(queues)}

    def capped_counts_statement(self, queues: Sequence[str], cap: int) -> tuple[str, Params]:
        return capped_counts(cap), {"queues": list(queues)}

    def refresh_head(self, queue: str, entered: Sequence[int] = ()) -> Row | None:
        rows = self.fetch(
            REFRESH_HEAD,
            {"queue": queue, "entered": list(entered), **quiet_params(WAKE_EVERY_LANE)},
        )
        return rows[0] if rows else None

    def settle_many(self, rows: Sequence[tuple[Any, ...]], quiet: QuietLanes) -> list[Row]:
        """Settle each (``SETTLE_MANY_COLUMNS``) and ready each queue's next head."""
        by_column = {
            name: list(column)
            for name, column in zip(SETTLE_MANY_COLUMNS, zip(*rows, strict=True), strict=True)
        }
        return self.fetch(SETTLE_MANY, {**by_column, **quiet_params(quiet)})
