"""MariaDB deadlock victims: a store-owned transaction InnoDB rolled back whole (error 1213)
runs again from its start; inside a caller's transaction the verb raises instead.

Each deadlock is arranged, never hoped for: a heavier transaction (many rows written, so
InnoDB picks the other one as its victim) holds queue ``qb``; the store call locks ``qa``,
then needs ``qb`` (seen by a third connection finding ``qa`` locked, not timed); then the
heavy transaction asks for ``qa``, closing the cycle.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import OperationalError, connection, transaction
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.models import Job, Worker
from django_watchdog.store.deadlocks import DeadlockRolledBack
from tests.testapp.models import Projection

from .helpers import in_background

pytestmark = [pytest.mark.mariadb_only, pytest.mark.django_db(transaction=True)]

DEADLOCK = 1213
#: Rows the heavy transaction writes (to a table the store call does not touch): InnoDB
#: rolls back the transaction that wrote less.
HEAVY_ROWS = 200
DEADLINE = 30.0


@contextmanager
def observer() -> Iterator[Callable[[str], bool]]:
    """Whether another transaction holds a queue's row lock now, asked on a connection of
    its own in autocommit (a row it finds free it locks for that one statement only)."""
    raw = connection.get_new_connection(connection.get_connection_params())
    raw.autocommit(True)

    def held(queue: str) -> bool:
        cursor = raw.cursor()
        cursor.execute(
            "SELECT name FROM watchdog_queue WHERE name = %s FOR UPDATE SKIP LOCKED", [queue]
        )
        free = cursor.fetchall()
        cursor.close()
        return not free

    try:
        yield held
    finally:
        raw.close()


def wait_for(condition: Callable[[], bool], failure: str) -> None:
    """Poll ``condition`` until it holds or the deadline passes."""
    done = threading.Event()
    timer = threading.Timer(DEADLINE, done.set)
    timer.start()
    try:
        while not condition():
            assert not done.is_set(), failure
            done.wait(0.01)
    finally:
        timer.cancel()


def lock_queue(name: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM watchdog_queue WHERE name = %s FOR UPDATE", [name])


def deadlock(store_call: Callable[[], Any]) -> tuple[list[Any], list[BaseException]]:
    """Run ``store_call`` (it must lock ``qa``, then ``qb``) into a deadlock it loses."""
    outcome: list[Any] = []
    errors: list[BaseException] = []
    with observer() as held, transaction.atomic():
        now = timezone.now()
        Worker.objects.bulk_create(
            Worker(worker_id=f"heavy-{n}", host="h", pid=n, started_at=now, heartbeat_at=now)
            for n in range(HEAVY_ROWS)
        )
        lock_queue("qb")
        thread = in_background(lambda: outcome.append(store_call()), errors)
        # Holding qa, the store call cannot get past qb: it waits for it, or soon will.
        wait_for(lambda: held("qa"), "the store call never locked qa")
        lock_queue("qa")  # the cycle: InnoDB rolls the lighter store call back
    # Committed: a rerun of the store call (waiting for qa now) goes on.
    thread.join(DEADLINE)
    assert not thread.is_alive(), "the store call hung"
    return outcome, errors


@pytest.fixture
def queues() -> None:
    for name in ("qa", "qb"):
        wd.enqueue(f"first-{name}", queue=name)


def both() -> list[str]:
    results = wd.enqueue_many([{"job_id": "a", "queue": "qa"}, {"job_id": "b", "queue": "qb"}])
    return [result.status for result in results]


def test_a_deadlocked_enqueue_runs_again_and_commits(queues: None, caplog: Any) -> None:
    caplog.set_level(logging.WARNING, logger="django_watchdog.store")
    outcome, errors = deadlock(both)
    assert errors == []
    assert outcome == [["queued", "queued"]]
    assert set(Job.objects.values_list("job_id", flat=True)) == {"first-qa", "first-qb", "a", "b"}
    retried = [r.getMessage() for r in caplog.records if "deadlock_retried" in r.getMessage()]
    assert len(retried) == 1, retried
    assert "verb=enqueue_many" in retried[0]


def test_inside_a_callers_transaction_a_deadlock_raises_and_nothing_is_rerun(
    queues: None, caplog: Any
) -> None:
    """The caller's own earlier write went with the rolled-back transaction: running the
    store's part again would commit the enqueue without it."""
    caplog.set_level(logging.WARNING, logger="django_watchdog.store")

    Projection.objects.create(queue="the-callers-row", head_state="idle")

    def in_a_view() -> list[str]:
        with transaction.atomic():
            Projection.objects.filter(queue="the-callers-row").update(head_state="written")
            return both()

    outcome, errors = deadlock(in_a_view)
    assert outcome == []
    assert len(errors) == 1 and isinstance(errors[0], DeadlockRolledBack), errors
    assert isinstance(errors[0], OperationalError)  # callers catching Django's error still do
    assert "whole transaction" in str(errors[0])
    assert errors[0].__cause__ is not None and errors[0].__cause__.args[0] == DEADLOCK
    assert Projection.objects.get(queue="the-callers-row").head_state == "idle"
    assert not Job.objects.filter(job_id__in=["a", "b"]).exists()
    assert not [r for r in caplog.records if "deadlock_retried" in r.getMessage()]
