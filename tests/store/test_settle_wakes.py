"""Whom a settle wakes on PostgreSQL: a head it makes ready sends ``NOTIFY`` on its lane,
unless the settling worker claims on from that lane in the same transaction (it takes that
head or a better job itself). ``NOTIFY`` makes PostgreSQL commit one notifying transaction
at a time, so a busy worker that announced every head it readied would cap the drain."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

import django_watchdog as wd
from django_watchdog.conf import setting, transaction_pooled
from django_watchdog.domain.values import Decision
from django_watchdog.store import batches
from django_watchdog.store.claims import Partition
from django_watchdog.store.dialects import dialect
from django_watchdog.store.store import Store

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]

#: Sent after the settle commits: notifications arrive in commit order, so what arrives
#: before it is all the settle sent.
MARK = "end-of-test"


@pytest.fixture
def listener() -> Iterator[psycopg.Connection]:
    if transaction_pooled():  # the LISTEN would hold a server session the pooler lends out
        pytest.skip("LISTEN needs a session of its own, not one behind a transaction pooler")
    with psycopg.connect(**dialect("default").listen_params(), autocommit=True) as conn:
        conn.execute(f'LISTEN "{setting("NOTIFY_CHANNEL")}"')
        yield conn


def heard(listener: psycopg.Connection) -> list[str]:
    """The lanes notified since the listener began, up to the mark."""
    with psycopg.connect(**dialect("default").listen_params(), autocommit=True) as other:
        other.execute("SELECT pg_notify(%s, %s)", [setting("NOTIFY_CHANNEL"), MARK])
    lanes = []
    for note in listener.notifies(timeout=30):
        if note.payload == MARK:
            return lanes
        lanes.append(note.payload)
    raise AssertionError(f"the mark never arrived; heard {lanes}")


def running_with_one_behind(listener: psycopg.Connection) -> str:
    """A running job of lane ``mail`` with one queued behind it in its queue: its settle
    makes that one the head. The enqueues' own notifications are read off first."""
    wd.enqueue("first", queue="q", lane="mail")
    wd.enqueue("second", queue="q", lane="mail")
    claimed = Store().claim()
    assert claimed.job is not None and claimed.job.job_id == "first"
    heard(listener)
    return str(claimed.job.claim_token)


@pytest.mark.parametrize(
    ("claim_next", "woken"),
    [
        (None, ["mail"]),  # claims nothing after: someone must take the head
        (Partition(), []),  # the default worker: every lane
        (Partition(lanes=("mail",)), []),
        (Partition(lanes=("mail", "sms"), exclude_lanes=("mail",)), ["mail"]),
        (Partition(lanes=("sms",)), ["mail"]),
        (Partition(exclude_lanes=("mail",)), ["mail"]),
        (Partition(exclude_lanes=("sms",)), []),
    ],
)
def test_a_head_made_ready_wakes_its_lane_unless_the_settling_worker_claims_from_it(
    listener: psycopg.Connection, claim_next: Partition | None, woken: list[str]
) -> None:
    token = running_with_one_behind(listener)
    Store().settle("first", token, Decision.completed(None), claim_next=claim_next)
    assert heard(listener) == woken


@pytest.mark.parametrize(
    ("claim_next", "woken"),
    [(Partition(), []), (Partition(exclude_lanes=("mail",)), ["mail"])],
)
def test_a_batch_settle_wakes_the_same_way(
    listener: psycopg.Connection, claim_next: Partition, woken: list[str]
) -> None:
    token = running_with_one_behind(listener)
    settlement = batches.Settlement(
        job_id="first", claim_token=token, decision=Decision.completed(None)
    )
    Store().settle_and_claim([settlement], claim_next=claim_next, limit=1)
    assert heard(listener) == woken
