"""Enqueue outside any transaction: the enqueue and queue-head tests again, in autocommit,
where a dialect that can runs ``enqueue()`` as a transaction of the database's own
(``Dialect.enter_job_alone``), and what that transaction does on PostgreSQL."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection

import django_watchdog as wd
from django_watchdog import JobConflict
from django_watchdog.models import Queue
from django_watchdog.store.store import Store

from .helpers import DONE, pipelined_messages, row
from .test_enqueue import *  # noqa: F403 - each test again, outside the test's transaction
from .test_heads import *  # noqa: F403

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_conflict_into_a_new_queue_leaves_no_queue_behind() -> None:
    wd.enqueue("j", queue="q")
    with pytest.raises(JobConflict):
        wd.enqueue("j", queue="fresh")
    assert not Queue.objects.filter(name="fresh").exists()
    assert wd.enqueue("j", queue="q").status == "duplicate"


def test_a_duplicate_leaves_the_queues_ready_head_ready() -> None:
    """The repeat would have outranked the head: it was not inserted, so nothing moves."""
    wd.enqueue("x", queue="q", priority=5)
    claim = Store().claim()
    assert claim.claim_token is not None
    Store().settle("x", claim.claim_token, DONE)
    wd.enqueue("a", queue="q")
    assert wd.enqueue("x", queue="q", priority=5).status == "duplicate"
    assert wd.queue_head("q").job_id == "a"
    assert row("a")["ready"] is True
    assert [job.job_id for job in [Store().claim().job] if job] == ["a"]


def test_a_conflict_into_a_new_queue_sends_no_failing_statement() -> None:
    """The taken id meets the queue the call created: the one exchange writes nothing and
    the server answers no error (no ErrorResponse on the wire, so no ERROR in its log and
    no rolled-back transaction); the conflict is read from the stored job."""
    wd.enqueue("j", queue="q")
    with pipelined_messages() as messages, pytest.raises(JobConflict):
        wd.enqueue("j", queue="fresh")
    assert "ErrorResponse" not in messages, messages
    assert not Queue.objects.filter(name="fresh").exists()


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's transaction of its own")
def test_an_error_inside_sqlites_own_transaction_rolls_it_back_and_leaves_autocommit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On SQLite the enqueue sends ``BEGIN IMMEDIATE`` and ``COMMIT`` itself, outside
    Django's ``atomic()``: an error between them (here after the queue's row went in) must
    leave nothing written and the connection in autocommit, not inside a transaction
    Django does not know of, which would swallow every later write uncommitted."""
    from django_watchdog.store.dialects.sqlite import SqliteDialect

    kept = SqliteDialect.fetch
    sent = []

    def failing_job_insert(self, sql, params=None):  # type: ignore[no-untyped-def]
        sent.append(sql)
        if "INSERT INTO watchdog_job" in sql:  # the job's insert, after the queue's
            raise DatabaseError("the disk is full")
        return kept(self, sql, params)

    monkeypatch.setattr(SqliteDialect, "fetch", failing_job_insert)
    with pytest.raises(DatabaseError, match="the disk is full"):
        wd.enqueue("j", queue="fresh")
    monkeypatch.setattr(SqliteDialect, "fetch", kept)
    assert any("INSERT INTO watchdog_queue" in sql for sql in sent[:-1])
    assert not connection.connection.in_transaction
    assert connection.get_autocommit()
    assert not Queue.objects.filter(name="fresh").exists()
    assert wd.enqueue("j", queue="fresh").status == "queued"
    with connection.cursor() as cursor:  # stored, and no transaction left open: committed
        cursor.execute("SELECT COUNT(*) FROM watchdog_job WHERE job_id = 'j'")
        assert cursor.fetchone()[0] == 1
    assert not connection.connection.in_transaction
