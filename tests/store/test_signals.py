"""``queue_changed`` (SPEC §4.12): sent inside the change's transaction, with head and
settled; a receiver's rows commit with the change, and a raising receiver rolls it back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import connection

import django_watchdog as wd
from django_watchdog import WatchdogError
from django_watchdog.domain.values import QueueHead
from django_watchdog.models import Job
from django_watchdog.signals import queue_changed
from django_watchdog.store.store import Store
from tests.testapp.models import Projection

from .helpers import DONE, claimed, row, snapshot

# transaction=True: the store's own transaction is the outermost one, so what a receiver
# sees and what a rollback undoes are exactly what production would get.
pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Sent:
    queue: str
    head: QueueHead
    settled: str | None
    settled_outcome: str | None
    in_transaction: bool


@pytest.fixture
def sent() -> Iterator[list[Sent]]:
    """Every signal sent, recorded; a projection row per queue written by the receiver."""
    record: list[Sent] = []

    def receiver(
        sender: Any, *, queue: str, head: QueueHead, settled: Job | None, **_: Any
    ) -> None:
        record.append(
            Sent(
                queue=queue,
                head=head,
                settled=settled.job_id if settled else None,
                settled_outcome=settled.outcome if settled else None,
                in_transaction=connection.in_atomic_block,
            )
        )
        projection, _created = Projection.objects.get_or_create(queue=queue)
        projection.head_state = head.state
        projection.head_job_id = head.job_id
        if settled is not None:
            projection.last_settled = settled.job_id
        projection.save()

    queue_changed.connect(receiver, sender=Job, dispatch_uid="test-projection")
    yield record
    queue_changed.disconnect(sender=Job, dispatch_uid="test-projection")


def _projection(queue: str) -> tuple[str, str | None, str | None]:
    p = Projection.objects.get(queue=queue)
    return (p.head_state, p.head_job_id, p.last_settled)


def test_every_change_sends_head_and_settled_inside_the_transaction(sent: list[Sent]) -> None:
    wd.enqueue("a", queue="q", max_recoveries=1)
    wd.enqueue("b", queue="q")
    token = claimed().claim_token or ""
    wd.cancel("b")
    Store().reconcile("a", token)
    token = claimed().claim_token or ""
    assert Store().claim().status == "cancelled"  # b: cancelled, ready at once
    Store().settle("a", token, DONE)
    wd.enqueue("c", queue="q", lane="mail")
    wd.enqueue("d", queue="q")
    wd.fail_lane("mail", "gone")
    wd.purge_queued("q")

    assert [(s.head.state, s.head.job_id, s.settled, s.settled_outcome) for s in sent] == [
        ("queued", "a", None, None),  # enqueue a
        ("queued", "a", None, None),  # enqueue b
        ("running", "a", None, None),  # claim a
        ("running", "a", None, None),  # cancel b (recorded)
        ("queued", "a", None, None),  # reconcile: a requeued
        ("running", "a", None, None),  # claim a again
        ("running", "a", "b", "cancelled"),  # claim reached cancelled b
        ("idle", None, "a", "completed"),  # settle a
        ("queued", "c", None, None),  # enqueue c
        ("queued", "c", None, None),  # enqueue d
        ("queued", "d", "c", "failed"),  # fail_lane settled c
        ("idle", None, None, None),  # purge d
    ]
    assert {s.queue for s in sent} == {"q"}
    assert all(s.in_transaction for s in sent)
    assert sent[3].head.cancellation_requested is False  # b is not the head
    assert _projection("q") == ("idle", None, "c")


def test_receiver_rows_commit_atomically_with_the_change(sent: list[Sent]) -> None:
    wd.enqueue("a", queue="q1")
    wd.enqueue("b", queue="q2")
    assert _projection("q1") == ("queued", "a", None)
    token = claimed().claim_token or ""
    assert _projection("q1") == ("running", "a", None)
    Store().settle("a", token, DONE)
    assert _projection("q1") == ("idle", None, "a")
    assert _projection("q2") == ("queued", "b", None)


class Boom(Exception):
    pass


@contextmanager
def raising_receiver(
    predicate: Callable[[QueueHead, Job | None], bool] = lambda head, settled: True,
) -> Iterator[None]:
    """Connect, after the projection receiver, one that raises when ``predicate`` holds."""

    def receiver(
        sender: Any, *, queue: str, head: QueueHead, settled: Job | None, **_: Any
    ) -> None:
        if predicate(head, settled):
            raise Boom("projection failed")

    queue_changed.connect(receiver, sender=Job, dispatch_uid="boom")
    try:
        yield
    finally:
        queue_changed.disconnect(sender=Job, dispatch_uid="boom")


def _setup_running() -> str:
    wd.enqueue("run", queue="q", max_recoveries=1)
    token = claimed().claim_token or ""
    wd.enqueue("wait", queue="q", lane="mail")
    return token


ACTIONS: dict[str, Callable[[str], Any]] = {
    "enqueue": lambda token: wd.enqueue("new", queue="q"),
    "enqueue-new-queue": lambda token: wd.enqueue("new", queue="fresh"),
    "cancel": lambda token: wd.cancel("wait"),
    "settle": lambda token: Store().settle("run", token, DONE)[0],
    "reconcile": lambda token: Store().reconcile("run", token),
    "fail_lane": lambda token: wd.fail_lane("mail", "gone"),
    "purge_queued": lambda token: wd.purge_queued("q"),
}


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_raising_receiver_rolls_the_change_back(sent: list[Sent], action: str) -> None:
    token = _setup_running()
    before = snapshot()
    # The projection receiver writes its row first: that must be rolled back too.
    with raising_receiver(), pytest.raises(Boom):
        ACTIONS[action](token)
    assert snapshot() == before


def test_raising_receiver_rolls_a_claim_back_and_the_job_stays_claimable(sent: list[Sent]) -> None:
    wd.enqueue("a", queue="q")
    before = snapshot()
    with raising_receiver(lambda h, s: h.state == "running"), pytest.raises(Boom):
        Store().claim()
    assert snapshot() == before
    assert row("a")["ready"] is True
    assert claimed().job.job_id == "a"  # type: ignore[union-attr]


def test_raising_receiver_rolls_back_reaching_a_cancelled_job(sent: list[Sent]) -> None:
    wd.enqueue("a", queue="q")
    wd.cancel("a")
    before = snapshot()
    with raising_receiver(lambda h, s: s is not None), pytest.raises(Boom):
        Store().claim()
    assert snapshot() == before
    assert Store().claim().status == "cancelled"


def test_a_row_quarantined_at_claim_time_is_announced_inside_the_transaction(
    sent: list[Sent],
) -> None:
    wd.enqueue("bad", queue="q", priority=5)
    wd.enqueue("behind", queue="q")
    Job.objects.filter(job_id="bad").update(lane="not a lane!")  # a hand edit
    del sent[:]
    with pytest.raises(WatchdogError):
        Store().claim()
    assert row("bad")["outcome"] == "failed"
    # The row cannot be decoded into a Job, so ``settled`` is None; the head moved on.
    assert [(s.queue, s.head.state, s.head.job_id, s.settled) for s in sent] == [
        ("q", "queued", "behind", None)
    ]
    assert sent[0].in_transaction
    assert _projection("q") == ("queued", "behind", None)


def test_raising_receiver_rolls_back_a_quarantine(sent: list[Sent]) -> None:
    wd.enqueue("bad", queue="q")
    Job.objects.filter(job_id="bad").update(lane="not a lane!")
    before = snapshot()
    with raising_receiver(), pytest.raises(Boom):
        Store().claim()
    assert snapshot() == before


def test_raising_receiver_rolls_back_the_callers_outer_transaction_too(sent: list[Sent]) -> None:
    from django.db import transaction

    with raising_receiver(lambda h, s: True), pytest.raises(Boom), transaction.atomic():
        Projection.objects.create(queue="user-row", head_state="x")
        wd.enqueue("a", queue="q")
    assert not Projection.objects.exists()
    assert wd.get_job("a") is None


def test_a_caller_that_catches_a_receivers_error_keeps_its_transaction(sent: list[Sent]) -> None:
    from django.db import transaction

    with transaction.atomic():
        Projection.objects.create(queue="user-row", head_state="x")
        with raising_receiver(lambda h, s: True), pytest.raises(Boom):
            wd.enqueue("a", queue="q")
        wd.enqueue("b", queue="q")  # the failed enqueue left nothing behind, and this works
    assert wd.get_job("a") is None and wd.get_job("b") is not None
    assert Projection.objects.filter(queue="user-row").exists()
