"""Forget idle task queues: delete the ``watchdog_queue`` rows of task queues no job names.

The task backend gives most calls a queue of their own (``task:<job_id>``) and each serial
key one (``task-key:...``), so their rows pile up once retention has pruned their jobs.
Enqueue relies on queue rows: every change to a queue locks its row first, a claim joins
it, and a queue an enqueue *creates* holds no job yet, so its best new job is its head
(``store.enqueue``). A row therefore goes only when no job of any state names it, judged
while its lock is held:

- PostgreSQL: a first statement locks idle-looking rows, skipping those another
  transaction holds (an enqueue into that queue, say: left for a later pass); a second
  statement, whose snapshot is taken after those locks were granted, deletes the locked
  rows no job names. An enqueue that named such a queue either committed before the lock
  was granted (the second statement sees its job and keeps the row) or waits for the
  lock and, the row being gone, inserts it anew (``ON CONFLICT`` retries the insert): the
  queue it creates is empty, as the rule above wants.
- SQLite: the write transaction excludes every other writer; one statement.

Each job-state probe is a ``LIMIT 1`` subquery on an index with the queue first (queued,
running, settled), not a ``NOT EXISTS`` the planner could turn into a scan of every job.
"""

from __future__ import annotations

from django.db import transaction

from . import vendor

#: Queue rows one pass deletes at most.
IDLE_BATCH = 1_000
#: Queues the task backend names (``tasks.mapping.PRIVATE_QUEUE_PREFIX``, ``tasks.keys``),
#: matched by prefix and case (``substr``: SQLite's ``LIKE`` ignores case).
TASK_QUEUE_PREFIXES = ("task:", "task-key:")
TASK_QUEUE = "(substr(q.name, 1, 5) = %s OR substr(q.name, 1, 9) = %s)"

NAMES_NO_JOB = """
       (SELECT 1 FROM watchdog_job j
         WHERE j.queue = q.name AND j.state = 'queued' AND j.delayed = <FALSE> LIMIT 1) IS NULL
   AND (SELECT 1 FROM watchdog_job j
         WHERE j.queue = q.name AND j.state = 'queued' AND j.delayed = <TRUE> LIMIT 1) IS NULL
   AND (SELECT 1 FROM watchdog_job j
         WHERE j.queue = q.name AND j.state = 'running' LIMIT 1) IS NULL
   AND (SELECT 1 FROM watchdog_job j
         WHERE j.queue = q.name AND j.state = 'settled' LIMIT 1) IS NULL
"""
LOCK_IDLE_POSTGRES = f"""
SELECT q.name FROM watchdog_queue q
 WHERE {TASK_QUEUE} AND {NAMES_NO_JOB}
 ORDER BY q.name
 LIMIT %s
   FOR UPDATE OF q SKIP LOCKED
"""
DELETE_LOCKED_IDLE_POSTGRES = f"""
DELETE FROM watchdog_queue q WHERE q.name = ANY(%s::text[]) AND {NAMES_NO_JOB}
"""
DELETE_IDLE_SQLITE = f"""
DELETE FROM watchdog_queue WHERE name IN (
    SELECT q.name FROM watchdog_queue q
     WHERE {TASK_QUEUE} AND {NAMES_NO_JOB}
     ORDER BY q.name
     LIMIT %s)
"""


def forget_idle_task_queues(using: str, *, batch_size: int = IDLE_BATCH) -> int:
    """Delete up to ``batch_size`` rows of task queues no job names; return how many."""
    with transaction.atomic(using=using):
        vendor.bound_lock_waits(using)
        if not vendor.is_postgres(using):
            return vendor.execute(using, DELETE_IDLE_SQLITE, [*TASK_QUEUE_PREFIXES, batch_size])
        locked = [
            name
            for (name,) in vendor.fetch(
                using, LOCK_IDLE_POSTGRES, [*TASK_QUEUE_PREFIXES, batch_size]
            )
        ]
        if not locked:
            return 0
        return vendor.execute(using, DELETE_LOCKED_IDLE_POSTGRES, [locked])
