"""The SQLite waker: a commit on another connection wakes an idle worker, and a worker with
no free slot is not polled for (its job thread claims on by itself)."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

import django_watchdog as wd
from django_watchdog.engine.wakeup import SQLITE_CHECK_INTERVAL, SqliteWaker

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture
def waker_of():
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite waker")
    started: list[SqliteWaker] = []

    def start(wanted: threading.Event) -> tuple[SqliteWaker, threading.Event]:
        woken = threading.Event()
        waker = SqliteWaker("default", woken, wanted.is_set)
        waker.start()
        started.append(waker)
        return waker, woken

    yield start
    for waker in started:
        waker.stop()


def _let_it_poll() -> None:
    """Let the waker's loop go round a few times (it polls every SQLITE_CHECK_INTERVAL)."""
    time.sleep(SQLITE_CHECK_INTERVAL * 10)


def test_a_commit_wakes_an_idle_worker(waker_of) -> None:
    wanted = threading.Event()
    wanted.set()
    _, woken = waker_of(wanted)
    _let_it_poll()  # it has read the version once
    wd.enqueue("a", queue="q")
    assert woken.wait(5), "the commit did not wake the worker"


def test_a_busy_worker_is_not_woken_until_a_slot_frees(waker_of) -> None:
    wanted = threading.Event()
    wanted.set()
    _, woken = waker_of(wanted)
    _let_it_poll()
    wanted.clear()  # every slot busy
    _let_it_poll()
    wd.enqueue("a", queue="q")
    _let_it_poll()
    assert not woken.is_set(), "a worker with no free slot was woken"
    wanted.set()  # a slot frees: the commit made meanwhile is noticed
    assert woken.wait(5), "the commit made while busy was never noticed"
