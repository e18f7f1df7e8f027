"""PostgreSQL: one job enqueued inside a transaction into a queue the connection has seen
exist takes the queue's lock alone, then the insert (``known_queues``); the hint may be
stale (the queue forgotten since), and the lock then creates the queue again."""

from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

import django_watchdog as wd
from django_watchdog import JobConflict
from django_watchdog.models import Job, Queue

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="PostgreSQL's enqueue of one job only"
    ),
]


def sent_inside(queue: str, job_id: str) -> list[str]:
    """The statements of one ``enqueue()`` inside ``transaction.atomic()``, without
    ``BEGIN`` and ``COMMIT``."""
    with CaptureQueriesContext(connection) as captured, transaction.atomic():
        assert wd.enqueue(job_id, queue=queue).status == "queued"
    texts = [" ".join(str(query["sql"]).split()) for query in captured.captured_queries]
    return [text for text in texts if text.upper() not in ("BEGIN", "COMMIT")]


def test_the_lock_of_a_queue_the_connection_has_seen_touches_the_queue_row_only() -> None:
    """The first enqueue finds the queue new (one statement); the next locks it with a
    statement that names no job table (no insert of jobs started and ended for nothing),
    then inserts."""
    assert len(sent_inside("busy", "first")) == 1
    lock, insert = sent_inside("busy", "second")
    assert "watchdog_queue" in lock and "watchdog_job" not in lock, lock
    assert "watchdog_job" in insert


def test_a_queue_forgotten_since_is_created_again_and_its_job_is_its_head() -> None:
    wd.enqueue("seen", queue="q")
    Job.objects.filter(queue="q").delete()
    Queue.objects.filter(name="q").delete()
    with transaction.atomic():
        result = wd.enqueue("again", queue="q")
    assert result.job is not None and result.job.ready is True
    assert Queue.objects.filter(name="q").exists()
    assert wd.queue_head("q").job_id == "again"


def test_a_conflicting_repeat_into_a_queue_forgotten_since_leaves_no_queue_behind() -> None:
    """The lock created the queue again; the repeat's conflict undoes that creation, as an
    enqueue into a queue it created does."""
    wd.enqueue("taken", queue="elsewhere")
    wd.enqueue("seen", queue="q")
    Job.objects.filter(queue="q").delete()
    Queue.objects.filter(name="q").delete()
    with pytest.raises(JobConflict), transaction.atomic():
        wd.enqueue("taken", queue="q")
    assert not Queue.objects.filter(name="q").exists()
    assert list(Job.objects.values_list("job_id", flat=True)) == ["taken"]
