"""PostgreSQL and MariaDB: the worker's store verbs wait for a lock another transaction holds
at most ``LOCK_TIMEOUT`` (SPEC §9 rule 16), and worker connections carry the session settings
that let the server end what a stalled worker leaves behind. One thread holds a queue's lock
(as a worker stopped inside a transaction would), the test's connection does the rest.

PostgreSQL bounds the worker's transaction (``lock_timeout``), MariaDB each lock-taking
statement (``SET STATEMENT max_statement_time``): on both the bound ends with what it bounds."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta

import pytest
from django.db import connection, connections, transaction
from django.test import override_settings
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.models import Job
from django_watchdog.store import claims, sessions
from django_watchdog.store.claims import Partition
from django_watchdog.store.store import Store
from django_watchdog.store.waits import LockBusy
from django_watchdog.store.worker_store import WorkerStore

from .helpers import DONE, claimed, in_background, watchdog_settings

pytestmark = [
    pytest.mark.server_only,
    pytest.mark.django_db(transaction=True),
]

BOUND = 0.2
#: A bounded wait must end well before this (the lock is held for much longer).
PROMPTLY = 5.0


def queue_held(name: str) -> AbstractContextManager[None]:
    """Hold ``name``'s queue lock in another connection while the block runs."""
    return row_held("SELECT 1 FROM watchdog_queue WHERE name = %s FOR UPDATE", name)


@contextmanager
def row_held(lock: str, key: str) -> Iterator[None]:
    """Hold the row lock ``lock`` takes (bound to ``key``) in another connection while the
    block runs."""
    holding, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(lock, [key])
            holding.set()
            assert release.wait(60), "the test never released the lock"

    holder = in_background(hold, errors)
    try:
        assert holding.wait(10)
        yield
    finally:
        release.set()
        holder.join(timeout=30)
    assert not errors, errors


#: How each server answers "how long may this session's statements wait?" when nothing
#: bounds them: (question, answer).
UNBOUNDED = {
    "postgresql": ("SHOW lock_timeout", "0"),
    "mysql": ("SELECT @@SESSION.max_statement_time", 0.0),
}


def assert_the_session_is_unbounded() -> None:
    """The test connection's session waits for locks as the server says (no bound left)."""
    question, answer = UNBOUNDED[connection.vendor]
    with connection.cursor() as cursor:
        cursor.execute(question)
        assert cursor.fetchone()[0] == answer


@pytest.fixture
def store():
    with watchdog_settings(LOCK_TIMEOUT=BOUND):
        yield WorkerStore("default")


def test_a_settle_behind_a_held_queue_gives_up_after_the_lock_timeout(store):
    wd.enqueue("a", queue="q")
    claim = claimed()
    with queue_held("q"):
        started = time.monotonic()
        with pytest.raises(LockBusy):
            store.settle("a", claim.claim_token, DONE)
        assert BOUND <= time.monotonic() - started < PROMPTLY
    assert Job.objects.get(job_id="a").state == "running", "nothing changed"
    settled, _ = store.settle("a", claim.claim_token, DONE)
    assert settled.status == "settled"


def test_a_settle_that_claims_on_behind_a_held_queue_gives_up_and_claims_nothing(store):
    """The worker's settle and next claim, sent together where they can be (one implicit
    transaction on PostgreSQL): bounded all the same, and the claim goes with the settle."""
    wd.enqueue("a", queue="q")
    claim = claimed()
    wd.enqueue("b", queue="r")  # ready: a claim that ran would take it
    with queue_held("q"):
        started = time.monotonic()
        with pytest.raises(LockBusy):
            store.settle("a", claim.claim_token, DONE, claim_next=Partition(), worker_id="w")
        assert BOUND <= time.monotonic() - started < PROMPTLY
    states = dict(Job.objects.values_list("job_id", "state"))
    assert states == {"a": "running", "b": "queued"}, "nothing changed"
    assert_the_session_is_unbounded()
    settled, next_one = store.settle(
        "a", claim.claim_token, DONE, claim_next=Partition(), worker_id="w"
    )
    assert settled.status == "settled"
    assert next_one is not None and not isinstance(next_one, Exception)
    assert next_one.job is not None and next_one.job.job_id == "b"
    assert_the_session_is_unbounded()


def test_the_bound_ends_with_the_transaction(store):
    """The bound is set for the worker's transaction (or statement) only: a handler's own
    queries on the same connection wait as the session says."""
    wd.enqueue("a", queue="q")
    claim = claimed()
    store.settle("a", claim.claim_token, DONE)
    assert_the_session_is_unbounded()


def test_a_heartbeat_behind_a_held_worker_row_gives_up_after_the_lock_timeout(store):
    """The heartbeat is one statement in autocommit, bounded all the same; its bound ends
    with it."""
    store.register("w", started_at=timezone.now(), lanes=(), exclude_lanes=(), concurrency=1)
    with row_held("SELECT 1 FROM watchdog_worker WHERE worker_id = %s FOR UPDATE", "w"):
        started = time.monotonic()
        with pytest.raises(LockBusy):
            store.heartbeat("w")
        assert BOUND <= time.monotonic() - started < PROMPTLY
    assert store.heartbeat("w") is True
    assert_the_session_is_unbounded()


def test_recovery_defers_a_claim_whose_queue_is_held_and_reconciles_the_rest(store):
    wd.enqueue("held", queue="held-q", max_recoveries=1)
    claimed(worker_id="gone")
    wd.enqueue("free", queue="free-q", max_recoveries=1)
    claimed(worker_id="gone")
    with queue_held("held-q"):
        started = time.monotonic()
        results = store.reconcile_all(store.disappeared_claims(timeout=1.0))
        assert time.monotonic() - started < PROMPTLY
    assert sorted((r.status, r.job_id or r.job.job_id) for r in results) == [
        ("deferred", "held"),
        ("requeued", "free"),
    ]
    assert Job.objects.get(job_id="held").state == "running"
    [later] = store.reconcile_all(store.disappeared_claims(timeout=1.0))
    assert (later.status, later.job.job_id) == ("requeued", "held")


def test_promotion_skips_a_held_queue_and_promotes_the_others(store):
    now = timezone.now()
    for queue in ("held-q", "free-q"):
        wd.enqueue(f"{queue}-job", queue=queue, run_after=now + timedelta(seconds=1))
    later = now + timedelta(seconds=2)
    with queue_held("held-q"):
        started = time.monotonic()
        assert store.promote_due(now=later) == 1
        assert time.monotonic() - started < BOUND, "it waited for no lock"
    assert Job.objects.get(job_id="held-q-job").delayed
    assert not Job.objects.get(job_id="free-q-job").delayed
    assert store.promote_due(now=later) == 1


def test_lost_claim_release_defers_a_claim_whose_queue_is_held(store):
    wd.enqueue("a", queue="q")
    assert store.claim(Partition(), worker_id="me", token="tok").claim_token == "tok.1"
    with queue_held("q"):
        assert store.release_lost_claims("me", ["tok"]) == ([], [("a", "tok")])
    assert store.release_lost_claims("me", ["tok"]) == (["a"], [])


def test_claims_skip_a_held_queue(store):
    wd.enqueue("held", queue="held-q", priority=9)
    wd.enqueue("free", queue="free-q")
    with queue_held("held-q"):
        result = store.claim(Partition(), worker_id="me")
    assert result.job.job_id == "free"


def test_a_claim_that_passed_a_held_queues_job_over_tries_again(store, monkeypatch):
    """The claim says when it saw a claimable job it did not take (here: its queue is
    held): it tries again, up to ``CLAIM_ATTEMPTS`` attempts (on PostgreSQL one statement
    each, on MariaDB four), then reports none."""
    attempts: list[int] = []
    take_ready = claims.take_ready

    def counted(*args: object, **kwargs: object) -> object:
        attempts.append(1)
        return take_ready(*args, **kwargs)

    wd.enqueue("held", queue="held-q")
    monkeypatch.setattr(claims, "take_ready", counted)
    with queue_held("held-q"):
        assert store.claim(Partition(), worker_id="me").status == "none"
    assert len(attempts) == claims.CLAIM_ATTEMPTS
    monkeypatch.undo()
    assert store.claim(Partition(), worker_id="me").job.job_id == "held"


def test_public_verbs_are_not_bounded():
    """Outside a worker (the API, the admin) a lock is waited for, as before."""
    wd.enqueue("a", queue="q")
    claim = claimed()
    errors: list[BaseException] = []
    with queue_held("q"):
        settler = in_background(lambda: Store().settle("a", claim.claim_token, DONE)[0], errors)
        settler.join(timeout=BOUND * 3)
        assert settler.is_alive(), "the public settle waits for the lock"
    settler.join(timeout=30)
    assert not errors, errors
    assert Job.objects.get(job_id="a").outcome == "completed"


#: What a worker's new connection reads back with IDLE_IN_TRANSACTION_TIMEOUT 7.5 and
#: TCP_KEEPALIVES_COUNT 4: (question, answers). Over TCP PostgreSQL's keepalive count is what
#: was set; over a Unix socket the server reads back 0. MariaDB takes whole seconds (rounded
#: up) and has no keepalive settings per session.
SESSION_READ_BACK = {
    "postgresql": {
        "SHOW idle_in_transaction_session_timeout": ("7500ms",),
        "SHOW tcp_keepalives_count": ("4", "0"),
    },
    "mysql": {"SELECT @@SESSION.idle_transaction_timeout": (8,)},
}


def test_worker_connections_get_the_session_settings():
    watchdog = {"IDLE_IN_TRANSACTION_TIMEOUT": 7.5, "TCP_KEEPALIVES_COUNT": 4}
    expected = SESSION_READ_BACK[connection.vendor]
    values: dict[str, object] = {}

    def read() -> None:
        with connections["default"].cursor() as cursor:
            for question in expected:
                cursor.execute(question)
                values[question] = cursor.fetchone()[0]

    with override_settings(WATCHDOG=watchdog):
        sessions.configure_worker_connections("default")
        try:
            errors: list[BaseException] = []
            reader = in_background(read, errors)  # a new thread: a new connection
            reader.join(timeout=30)
            assert not errors, errors
        finally:
            from django.db.backends.signals import connection_created

            connection_created.disconnect(dispatch_uid="django_watchdog.worker_session.default")
    for question, answers in expected.items():
        assert values[question] in answers, question


def test_the_session_settings_name_what_is_configured():
    with override_settings(WATCHDOG={"IDLE_IN_TRANSACTION_TIMEOUT": None, "TCP_USER_TIMEOUT": 2.5}):
        assert dict(sessions.worker_session()) == {
            "tcp_keepalives_idle": "30",
            "tcp_keepalives_interval": "10",
            "tcp_keepalives_count": "3",
            "tcp_user_timeout": "2500",
        }
