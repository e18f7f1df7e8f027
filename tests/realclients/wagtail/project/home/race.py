"""The race gate: parks a worker's task that has just read a "race" author until the
request deleting that author has committed, or provably cannot commit before the task's
transaction ends, so the test hits the interleaving a live site hits by chance.

The interleaving: an index task reads an object, a request deletes the object (Wagtail's
``post_delete`` handlers remove its index rows in the request), then the task writes the
object's index rows, which outlive it. Installed in the worker only (``WAGTAIL_RACE_GATE``
names the directory of the markers the two processes share):

- the task, when it loads an author whose name starts with ``race`` (``post_init``: the row
  has been read), touches ``<pk>.reached`` and waits, polling with a deadline;
- the request (``scenario N race``) creates the author and its tasks in one transaction,
  waits for ``<pk>.reached``, touches ``<pk>.deleting`` and deletes the author (it writes
  nothing else after its tasks can start: a task parked inside an ``IMMEDIATE`` SQLite
  transaction holds the database's write lock);
- the task goes on once ``<pk>.deleting`` exists and either the delete has committed (a
  fresh session no longer finds the row) or it cannot commit before this task's
  transaction ends: on PostgreSQL a ``DELETE`` of the author waits on this session's
  locks, directly or behind another waiter; on SQLite
  this session is inside a transaction, which began ``IMMEDIATE`` and so holds the
  database's write lock that the delete's transaction must wait for.
"""

import os
import time
from pathlib import Path

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models.signals import post_init

DEADLINE = 120.0

#: How many sessions run a DELETE of the table (``%s``: ``DELETE FROM "table"%``) and wait
#: on this session, directly or behind another waiter (the other index task of the same
#: author, queued first for the row lock, holds the lock that the delete waits for).
WAITING_DELETE = """
WITH RECURSIVE waiting(pid) AS (
    SELECT pid FROM pg_stat_activity WHERE pg_backend_pid() = ANY(pg_blocking_pids(pid))
    UNION
    SELECT a.pid FROM pg_stat_activity a JOIN waiting w ON w.pid = ANY(pg_blocking_pids(a.pid))
)
SELECT count(*) FROM pg_stat_activity a JOIN waiting w ON w.pid = a.pid
WHERE a.query LIKE %s
"""
ENVIRONMENT = "WAGTAIL_RACE_GATE"


def install() -> None:
    """Connect the gate when this process is the worker of a race run."""
    if os.environ.get(ENVIRONMENT):
        from home.models import Author

        post_init.connect(park, sender=Author, dispatch_uid="race-gate")


def park(sender, instance, **kwargs) -> None:
    if instance.pk is None or not str(instance.name).startswith("race"):
        return
    markers = Path(os.environ[ENVIRONMENT])
    (markers / f"{instance.pk}.reached").touch()
    deadline = time.monotonic() + DEADLINE
    while not released(instance, markers):
        if time.monotonic() > deadline:
            raise RuntimeError(f"race gate: author {instance.pk}'s delete never came")
        time.sleep(0.05)  # polling the other process's progress, with a deadline


def released(instance, markers: Path) -> bool:
    if not (markers / f"{instance.pk}.deleting").exists():
        return False
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            # pg_stat_activity is read once per transaction unless its snapshot is cleared.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(WAITING_DELETE, [f'DELETE FROM "{instance._meta.db_table}"%'])
            if cursor.fetchone()[0]:
                return True
    elif connection.in_atomic_block:
        return True
    return not exists_in_a_fresh_session(instance)


def exists_in_a_fresh_session(instance) -> bool:
    fresh = connections.create_connection(DEFAULT_DB_ALIAS)
    try:
        with fresh.cursor() as cursor:
            table = fresh.ops.quote_name(instance._meta.db_table)
            cursor.execute(f"SELECT 1 FROM {table} WHERE id = %s", [instance.pk])  # noqa: S608
            return cursor.fetchone() is not None
    finally:
        fresh.close()
