"""Behind PgBouncer in transaction mode: nothing watchdog does depends on keeping a session.

The ``pgbouncer_only`` tests run with WATCHDOG_TEST_DB=pgbouncer (scripts/ensure-pgbouncer
starts it), where the settings declare ``TRANSACTION_POOLER`` and a direct ``LISTEN_DATABASE``.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

import django_watchdog as wd
from django_watchdog import conf
from django_watchdog.engine import wakeup
from django_watchdog.models import Job
from django_watchdog.store import sessions

from .helpers import watchdog_settings


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_worker_connections_get_no_session_settings_behind_a_transaction_pooler():
    connection.ensure_connection()
    with watchdog_settings(TRANSACTION_POOLER=True), CaptureQueriesContext(connection) as captured:
        sessions.configure(connection)
    assert captured.captured_queries == []
    with watchdog_settings(TRANSACTION_POOLER=False), CaptureQueriesContext(connection) as captured:
        sessions.configure(connection)
    assert len(captured.captured_queries) == 1  # set_config(..., false) for the session


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({}, True),
        ({"TRANSACTION_POOLER": True}, False),
        ({"TRANSACTION_POOLER": True, "PREPARED_STATEMENTS": True}, True),
        ({"PREPARED_STATEMENTS": False}, False),
    ],
)
def test_statements_are_prepared_unless_pooled_or_told_not_to(overrides, expected):
    with override_settings(WATCHDOG=overrides):
        assert conf.prepared_statements() is expected


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_a_worker_behind_a_pooler_listens_only_on_the_listen_database():
    event = threading.Event()
    with watchdog_settings(TRANSACTION_POOLER=True, LISTEN_DATABASE=None):
        assert wakeup.make_waker("default", event, lambda: True) is None  # it polls
    with watchdog_settings(TRANSACTION_POOLER=True, LISTEN_DATABASE="elsewhere"):
        waker = wakeup.make_waker("default", event, lambda: True)
        assert isinstance(waker, wakeup.PostgresWaker) and waker.using == "elsewhere"
    with watchdog_settings(TRANSACTION_POOLER=False, LISTEN_DATABASE=None):
        assert wakeup.make_waker("default", event, lambda: True).using == "default"


@pytest.mark.pgbouncer_only
@pytest.mark.django_db(transaction=True)
def test_two_connections_sharing_server_sessions_run_watchdog_statements():
    """psycopg names prepared statements per client (_pg3_0, ...); PgBouncer 1.18 hands a
    server session to the next client with them still there, so a prepared claim or enqueue
    fails with 'prepared statement "_pg3_0" already exists'."""
    errors: list[BaseException] = []

    def enqueue_some(name: str, start: threading.Event, done: threading.Event) -> None:
        try:
            for n in range(5):
                start.wait(10)
                start.clear()
                wd.enqueue(f"{name}-{n}", queue=f"{name}-{n}")
                done.set()
        except BaseException as error:  # noqa: BLE001 - reported by the test
            errors.append(error)
            done.set()
        finally:
            connections.close_all()

    turns = [(threading.Event(), threading.Event()) for _ in range(2)]
    threads = [
        threading.Thread(target=enqueue_some, args=(name, *turn))
        for name, turn in zip("ab", turns, strict=True)
    ]
    for thread in threads:
        thread.start()
    for _ in range(5):  # a, then b, one statement each: they take turns on one server session
        for start, done in turns:
            done.clear()
            start.set()
            assert done.wait(10)
            if errors:
                break
    for start, _ in turns:
        start.set()
    for thread in threads:
        thread.join(10)
    assert errors == []
    assert Job.objects.count() == 10
