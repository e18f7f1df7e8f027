"""MariaDB's claim: four short statements where PostgreSQL's is one.

MariaDB has no ``FOR UPDATE OF``: a locking read over a join locks the rows of every table
it reads, so a claim joined to ``watchdog_queue`` would keep a skipped job locked until it
ends. So the claim locks queues first, as every other verb does (``mariadb-dialect.md``):

1. ``CANDIDATES``: a plain read of the claim index (no lock; current as of the statement);
2. ``HOLD``: their queues, locked in name order with ``SKIP LOCKED`` (a queue another
   transaction changes is left to it);
3. ``READY_IN``: the claimable jobs of the held queues, locked and re-read (a locking read
   sees the latest committed rows), with the database's clock;
4. ``TAKE`` (or ``SETTLE_CANCELLED``) per job picked: the best job of each queue, and every
   cancelled one, as PostgreSQL's claim picks them. The rows returned are the re-read rows
   with what step 4 wrote, so nothing is read back.

Runs inside the claim's transaction (``Dialect.claim_transaction``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from . import common
from .base import Params, Row, in_clause
from .mariadb_terms import is_set

if TYPE_CHECKING:
    from .mariadb import MariadbDialect

#: Candidates read beyond the claim's limit, for queues another claimer holds.
CANDIDATE_SLACK = 8
#: What a claim that took nothing returns when it passed claimable jobs over (their queues
#: held elsewhere, or taken first): a row whose ``id`` is NULL, so the caller tries again.
PASSED_OVER: Row = tuple(None for _ in common.JOB_COLUMNS)


def _is_set(column: str) -> str:
    return f"{column} = TRUE"


@lru_cache(maxsize=64)
def candidates(lanes: str, limit: str = "%(limit)s", columns: str = "j.id, j.queue") -> str:
    """Step 1: the best claimable jobs (``columns``) of the partition, up to ``limit``."""
    return f"""
SELECT {columns} FROM watchdog_job j
 WHERE {common.claimable(_is_set, lanes)}
 ORDER BY j.priority DESC, j.position ASC, j.id ASC
 LIMIT {limit}
"""


@lru_cache(maxsize=128)
def hold(names: str) -> str:
    """Step 2: lock the queues ``names`` (an ``IN`` clause) not held elsewhere."""
    return f"SELECT name FROM watchdog_queue WHERE {names} ORDER BY name FOR UPDATE SKIP LOCKED"


@lru_cache(maxsize=128)
def ready_in(lanes: str, queues: str) -> str:
    """Step 3: the claimable jobs of the held ``queues``, locked, best first, each with
    the database's clock (the subquery of ``claimable`` locks nothing). Read through the
    ``(queue, ready)`` index, so the rows it locks, even for a moment, are the held queues'
    ready ones: a walk of the claim index would wait on, and deadlock with, other claims."""
    columns = ", ".join(f"j.`{column}`" for column in common.JOB_COLUMNS)
    return f"""
SELECT {columns}, UTC_TIMESTAMP(6) FROM watchdog_job j FORCE INDEX (watchdog_job_ready)
 WHERE {queues} AND {common.claimable(_is_set, lanes)}
 ORDER BY j.priority DESC, j.position ASC, j.id ASC
   FOR UPDATE
"""


#: Step 4 for a job to run: ``%(claim_token)s`` for ``%(worker_id)s``, started ``%(now)s``.
TAKE = """
UPDATE watchdog_job SET state = 'running', ready = FALSE, claim_token = %(claim_token)s,
       claimed_by = %(worker_id)s, started_at = %(now)s, attempts = attempts + 1,
       retry_at = NULL
 WHERE id = %(id)s AND state = 'queued' AND ready = TRUE
"""
#: Step 4 for a cancelled job: settled ``cancelled`` unrun.
SETTLE_CANCELLED = """
UPDATE watchdog_job SET state = 'settled', outcome = 'cancelled', ready = FALSE,
       claim_token = NULL, claimed_by = NULL, settled_at = %(now)s, retry_at = NULL
 WHERE id = %(id)s AND state = 'queued' AND ready = TRUE
"""


@lru_cache(maxsize=64)
def probe(lanes: str) -> str:
    """The idle worker's probe (``WAKE = "probe"``), one statement that locks nothing: the
    id of the best job of the partition that could be claimed now (one walk of the claim
    index), and when the next delayed job or retry of any lane comes due (the worker's
    ``next_due``: an end of the ``watchdog_job_due`` and ``watchdog_job_retry_due`` indexes
    each). A new id is new
    work, a new due time a wait the worker must learn of; the same values read again (a
    job another claimer holds, a delay already known) wake no one twice."""
    best = candidates(lanes, limit="1", columns="j.id")
    return f"SELECT ({best}) AS ready, ({common.next_due(is_set)}) AS due"


def claim(dialect: MariadbDialect, lanes: str, params: Params) -> list[Row]:
    """Take up to ``%(limit)s`` of the best ready jobs of the partition (``lanes``), each
    under ``%(token)s.<n>``: the rows as they now stand."""
    limit = int(params["limit"])
    found = dialect.fetch(candidates(lanes), {**params, "limit": limit + CANDIDATE_SLACK})
    if not found:
        return []
    clause, names = in_clause("name", "queue", sorted({queue for _, queue in found}))
    held = [name for (name,) in dialect.fetch(hold(clause), names)]
    if not held:
        return [PASSED_OVER]
    clause, names = in_clause("j.queue", "held", held)
    ready = dialect.fetch(ready_in(lanes, clause), {**params, **names})
    taken = []
    for n, row in enumerate(_picked(ready, limit), start=1):
        *job, now = row
        taken.append(_take(dialect, job, now, f"{params['token']}.{n}", params["worker_id"]))
    written = [row for row in taken if row is not None]
    return written or [PASSED_OVER]


def _picked(rows: list[Row], limit: int) -> list[Row]:
    """Of ``rows`` (best first), every cancelled one and the best other of each queue."""
    cancellation, queue = (common.JOB_COLUMNS.index(c) for c in ("cancellation_id", "queue"))
    running: set[str] = set()
    picked = []
    for row in rows:
        if row[cancellation] is None:
            if row[queue] in running:
                continue
            running.add(row[queue])
        picked.append(row)
        if len(picked) == limit:
            break
    return picked


def _take(
    dialect: MariadbDialect, job: list[Any], now: Any, token: str, worker_id: Any
) -> Row | None:
    """Step 4 for one job: the row as written, ``None`` if it changed meanwhile."""
    at = {column: index for index, column in enumerate(common.JOB_COLUMNS)}
    cancelled = job[at["cancellation_id"]] is not None
    if cancelled:
        changed = dialect.execute(SETTLE_CANCELLED, {"id": job[at["id"]], "now": now})
        written = {"state": "settled", "outcome": "cancelled", "settled_at": now}
        written.update(claim_token=None, claimed_by=None)
    else:
        bound = {"id": job[at["id"]], "now": now, "claim_token": token, "worker_id": worker_id}
        changed = dialect.execute(TAKE, bound)
        written = {"state": "running", "claim_token": token, "claimed_by": worker_id}
        written.update(started_at=now, attempts=job[at["attempts"]] + 1)
    if not changed:
        return None
    written.update(ready=0, retry_at=None)
    for column, value in written.items():
        job[at[column]] = value
    return tuple(job)
