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

from . import deadlocks
from .dialects import dialect

#: Queue rows one pass deletes at most.
IDLE_BATCH = 1_000
#: Queues the task backend names (``tasks.mapping.PRIVATE_QUEUE_PREFIX``, ``tasks.keys``),
#: matched by prefix and case (``substr``: SQLite's ``LIKE`` ignores case): the dialects'
#: ``common.TASK_QUEUE`` binds them as ``task_prefix`` and ``task_key_prefix``.
TASK_QUEUE_PREFIXES = ("task:", "task-key:")


@deadlocks.retried
def forget_idle_task_queues(using: str, *, batch_size: int = IDLE_BATCH) -> int:
    """Delete up to ``batch_size`` rows of task queues no job names; return how many."""
    d = dialect(using)
    with transaction.atomic(using=using):
        d.bound_lock_waits()
        task_prefix, task_key_prefix = TASK_QUEUE_PREFIXES
        return d.forget_idle_queues(
            {"task_prefix": task_prefix, "task_key_prefix": task_key_prefix, "limit": batch_size}
        )
