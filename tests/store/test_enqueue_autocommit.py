"""Enqueue outside any transaction: the enqueue and queue-head tests again, in autocommit,
where a dialect that can runs ``enqueue()`` as a transaction of the database's own
(``Dialect.enter_job_alone``), and what that transaction does on PostgreSQL."""

from __future__ import annotations

import pytest

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
