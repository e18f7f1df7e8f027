"""The polling wakers: on SQLite a commit on another connection wakes an idle worker, on
MariaDB a new ready job does; a worker with no free slot is not polled for (its job
thread claims on by itself)."""

from __future__ import annotations

import threading
from datetime import timedelta
from functools import partial

import pytest
from django.db import connection, transaction
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.domain.states import Outcome
from django_watchdog.domain.values import Decision
from django_watchdog.engine.wakeup import ProbeWaker, SqliteWaker
from django_watchdog.store.claims import Partition
from django_watchdog.store.store import Store

pytestmark = [pytest.mark.django_db(transaction=True)]


class FreeSlot:
    """The waker's question "is a slot free?", with the answer the test sets, counting how
    often it is asked: the waker asks once a round, before it reads the data version, so
    two more questions mean a whole round began and ended."""

    def __init__(self) -> None:
        self.free = threading.Event()
        self._asked = 0
        self._changed = threading.Condition()

    def __call__(self) -> bool:
        with self._changed:
            self._asked += 1
            self._changed.notify_all()
        return self.free.is_set()

    def let_it_poll(self) -> None:
        """Until the waker has gone round once more, from question to question (it waits
        SQLITE_CHECK_INTERVAL or PROBE_INTERVAL between rounds), with a generous deadline."""
        with self._changed:
            target = self._asked + 2
            assert self._changed.wait_for(lambda: self._asked >= target, timeout=60), (
                "the waker stopped going round"
            )


@pytest.fixture
def waker_of():
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite waker")
    started: list[SqliteWaker] = []

    def start(slot: FreeSlot) -> tuple[SqliteWaker, threading.Event]:
        woken = threading.Event()
        waker = SqliteWaker("default", woken, slot)
        waker.start()
        started.append(waker)
        return waker, woken

    yield start
    for waker in started:
        waker.stop()


def test_a_commit_wakes_an_idle_worker(waker_of) -> None:
    slot = FreeSlot()
    slot.free.set()
    _, woken = waker_of(slot)
    slot.let_it_poll()  # it has read the version once
    wd.enqueue("a", queue="q")
    assert woken.wait(30), "the commit did not wake the worker"


def test_a_busy_worker_is_not_woken_until_a_slot_frees(waker_of) -> None:
    slot = FreeSlot()
    slot.free.set()
    _, woken = waker_of(slot)
    slot.let_it_poll()
    slot.free.clear()  # every slot busy
    slot.let_it_poll()
    wd.enqueue("a", queue="q")
    slot.let_it_poll()
    assert not woken.is_set(), "a worker with no free slot was woken"
    slot.free.set()  # a slot frees: the commit made meanwhile is noticed
    assert woken.wait(30), "the commit made while busy was never noticed"


# MariaDB: no NOTIFY; the idle worker probes the claim index for the best ready job.


@pytest.fixture
def prober_of():
    if connection.vendor != "mysql":
        pytest.skip("the MariaDB probe waker")
    started: list[ProbeWaker] = []

    def start(slot: FreeSlot) -> tuple[ProbeWaker, threading.Event]:
        woken = threading.Event()
        probe = partial(Store().ready_probe, Partition())
        waker = ProbeWaker("default", woken, slot, probe)
        waker.start()
        started.append(waker)
        return waker, woken

    yield start
    for waker in started:
        waker.stop()


def test_a_ready_job_wakes_an_idle_prober_once(prober_of) -> None:
    slot = FreeSlot()
    slot.free.set()
    _, woken = prober_of(slot)
    wd.enqueue("a", queue="q")
    assert woken.wait(5), "the new ready job did not wake the worker"
    woken.clear()
    for _ in range(3):  # proving an absence: three whole rounds, each probing once
        slot.let_it_poll()
    assert not woken.is_set(), "a job still ready (held by another claimer) woke it again"
    wd.enqueue("b", queue="q2", priority=1)  # a better one is news
    assert woken.wait(5), "a new best ready job did not wake the worker"


def test_a_busy_prober_is_not_woken_until_a_slot_frees(prober_of) -> None:
    slot = FreeSlot()
    _, woken = prober_of(slot)  # every slot busy from the start
    wd.enqueue("a", queue="q")
    for _ in range(3):  # proving an absence: three whole rounds, each asking for a slot
        slot.let_it_poll()
    assert not woken.is_set(), "a worker with no free slot was woken"
    slot.free.set()
    assert woken.wait(5), "the job made ready while busy was never noticed"


def _enqueue_delayed(job_id: str, hours: float) -> None:
    wd.enqueue(job_id, queue=job_id, run_after=timezone.now() + timedelta(hours=hours))


def _retry_set_by_another_worker(job_id: str, hours: float) -> None:
    """Another worker runs a new job, which fails and waits to retry, all in one
    transaction: the probe never sees it ready."""
    store = Store()
    retry_at = timezone.now() + timedelta(hours=hours)
    decision = Decision(outcome=Outcome.FAILED, failure_reason="E: again", retry_at=retry_at)
    with transaction.atomic():
        wd.enqueue(job_id, queue=job_id)
        claimed = store.claim(worker_id="another")
        assert claimed.status == "claimed" and claimed.job.job_id == job_id
        settled, _ = store.settle(job_id, str(claimed.claim_token), decision)
        assert settled.status == "retrying", settled
    assert wd.get_job(job_id).retry_at == retry_at


@pytest.mark.parametrize(
    "come_due", [_enqueue_delayed, _retry_set_by_another_worker], ids=["delayed", "retry"]
)
def test_a_job_due_sooner_than_any_before_wakes_an_idle_prober_once(prober_of, come_due) -> None:
    """What makes a job due at a time the idle worker could not know wakes it within a
    probe round (it then reads the next due time); a later due time, or the same one
    probed again, does not."""
    slot = FreeSlot()
    slot.free.set()
    _, woken = prober_of(slot)
    slot.let_it_poll()  # it has probed an empty table
    come_due("in-two-hours", hours=2)
    slot.let_it_poll()  # a whole round began after the commit: it probed once since
    assert woken.is_set(), "a job due in two hours did not wake the worker"
    woken.clear()
    for _ in range(3):  # proving an absence: three whole rounds, each probing once
        slot.let_it_poll()
    assert not woken.is_set(), "the same due time woke it again"
    come_due("in-three-hours", hours=3)  # the worker already waits for an earlier one
    for _ in range(3):
        slot.let_it_poll()
    assert not woken.is_set(), "a job due after the next due one woke it"
    come_due("in-an-hour", hours=1)
    slot.let_it_poll()
    assert woken.is_set(), "a job due sooner than the next due one did not wake the worker"
