"""The settled feed (SPEC §4.11): stable order, a horizon at the first pending job, and
exactly-once reading on from cursors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db.models import F

import django_watchdog as wd
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job
from django_watchdog.store.store import Store

from .helpers import DONE, claimed

pytestmark = pytest.mark.django_db


def _run(job_id: str, decision: Decision = DONE) -> None:
    """Claim ``job_id`` (it must be the best ready job) and settle it."""
    result = Store().claim()
    assert result.job is not None and result.job.job_id == job_id, result
    if result.status == "claimed":
        Store().settle(job_id, result.claim_token or "", decision)


def ids(records: list[Any]) -> list[str]:
    return [record.job.job_id for record in records]


def drain(
    after: str | None = None, limit: int = 2, **partition: str
) -> tuple[list[str], str | None]:
    """Read on from ``after`` until the feed is empty; the ids read and the last cursor."""
    seen: list[str] = []
    while True:
        page = wd.settled_jobs(after, limit, **partition)
        if not page:
            return seen, after
        seen += ids(page)
        after = page[-1].cursor


def test_empty_feed() -> None:
    assert wd.settled_jobs() == []


def test_order_is_enqueue_order_not_settle_order() -> None:
    wd.enqueue("a", queue="q1")
    wd.enqueue("b", queue="q2", priority=5)
    _run("b")  # b settles first
    # a is pending and enqueued before b: the feed does not pass it.
    assert wd.settled_jobs() == []
    _run("a")
    records = wd.settled_jobs()
    assert ids(records) == ["a", "b"]
    assert all(record.job.state == "settled" for record in records)


def test_never_past_the_first_pending_job() -> None:
    for name in ("a", "b", "c", "d"):
        wd.enqueue(name, queue=f"q-{name}")
    _run("a")
    _run("b")
    running = claimed()  # c runs
    assert running.job is not None and running.job.job_id == "c"
    _run("d")
    assert ids(wd.settled_jobs()) == ["a", "b"]
    Store().settle("c", running.claim_token or "", DONE)
    assert ids(wd.settled_jobs()) == ["a", "b", "c", "d"]


def test_cursors_read_on_exactly_once() -> None:
    for index in range(7):
        wd.enqueue(f"j{index}", queue=f"q{index}")
    for index in range(5):
        _run(f"j{index}")
    first, cursor = drain(limit=2)
    assert first == ["j0", "j1", "j2", "j3", "j4"]
    assert wd.settled_jobs(cursor) == []
    _run("j5")
    wd.enqueue("j7", queue="q7")
    _run("j6")
    second, cursor = drain(cursor, limit=3)
    assert second == ["j5", "j6"]  # j7 is pending: the horizon
    _run("j7")
    third, _ = drain(cursor)
    assert third == ["j7"]


def test_cursor_is_stable_and_repeatable() -> None:
    for name in ("a", "b", "c"):
        wd.enqueue(name, queue=name)
        _run(name)
    page = wd.settled_jobs(limit=1)
    assert ids(page) == ["a"]
    assert ids(wd.settled_jobs(page[0].cursor)) == ["b", "c"]
    assert ids(wd.settled_jobs(page[0].cursor)) == ["b", "c"]  # reading does not consume
    assert ids(wd.settled_jobs()) == ["a", "b", "c"]
    assert all(isinstance(record.cursor, str) for record in page)


def test_limit() -> None:
    for index in range(5):
        wd.enqueue(f"j{index}", queue=f"q{index}")
        _run(f"j{index}")
    assert len(wd.settled_jobs(limit=1)) == 1
    assert len(wd.settled_jobs(limit=10_000)) == 5


def test_every_outcome_is_in_the_feed() -> None:
    wd.enqueue("done", queue="q1")
    wd.enqueue("failed", queue="q2")
    wd.enqueue("unknown", queue="q3")
    wd.enqueue("cancelled", queue="q4")
    wd.enqueue("interrupted", queue="q5")
    wd.enqueue("lane", queue="q6", lane="gone")
    _run("done")
    _run("failed", Decision.failed("E: x"))
    _run("unknown", Decision.outcome_unknown())
    wd.cancel("cancelled")
    _run("cancelled")
    interrupted = claimed()
    Store().reconcile("interrupted", interrupted.claim_token or "")
    wd.fail_lane("gone", "lane failed")
    assert [(r.job.job_id, r.job.outcome) for r in wd.settled_jobs()] == [
        ("done", "completed"),
        ("failed", "failed"),
        ("unknown", "outcome_unknown"),
        ("cancelled", "cancelled"),
        ("interrupted", "interrupted"),
        ("lane", "failed"),
    ]


def test_purged_jobs_do_not_hold_the_horizon() -> None:
    wd.enqueue("a", queue="q1")
    wd.enqueue("stuck", queue="q2", priority=-1)  # head of q2, claimed after the others
    wd.enqueue("stuck-2", queue="q2", priority=-1)
    wd.enqueue("b", queue="q3")
    assert wd.settled_jobs() == []  # positions assigned; a is pending
    _run("a")
    _run("b")
    assert ids(wd.settled_jobs()) == ["a"]
    wd.purge_queued("q2")
    assert ids(wd.settled_jobs()) == ["a", "b"]


def test_requeued_job_keeps_holding_the_horizon() -> None:
    wd.enqueue("a", queue="q1", max_recoveries=1)
    wd.enqueue("b", queue="q2")
    token = claimed().claim_token or ""
    _run("b")
    Store().reconcile("a", token)
    assert wd.settled_jobs() == []
    _run("a")
    assert ids(wd.settled_jobs()) == ["a", "b"]


class TestPartitions:
    """A lane partition has its own horizon: a pending job elsewhere does not hold it."""

    @pytest.fixture(autouse=True)
    def jobs(self) -> None:
        wd.enqueue("m1", queue="q1", lane="mail")
        wd.enqueue("s1", queue="q2", lane="sms", priority=-1)  # stays pending below
        wd.enqueue("m2", queue="q3", lane="mail")
        wd.enqueue("p1", queue="q4", lane="push")
        for name in ("m1", "m2", "p1"):
            _run(name)

    def test_all_lanes_stop_at_the_pending_sms_job(self) -> None:
        assert ids(wd.settled_jobs()) == ["m1"]

    def test_one_lane(self) -> None:
        assert ids(wd.settled_jobs(lane="mail")) == ["m1", "m2"]
        assert ids(wd.settled_jobs(lane="push")) == ["p1"]
        assert wd.settled_jobs(lane="sms") == []

    def test_all_but_one_lane(self) -> None:
        assert ids(wd.settled_jobs(exclude_lane="sms")) == ["m1", "m2", "p1"]
        assert ids(wd.settled_jobs(exclude_lane="mail")) == []
        assert ids(wd.settled_jobs(exclude_lane="push")) == ["m1"]

    def test_each_partition_reads_on_exactly_once(self) -> None:
        mail, mail_cursor = drain(lane="mail", limit=1)
        rest, rest_cursor = drain(exclude_lane="mail", limit=1)
        everything, all_cursor = drain(limit=1)
        assert (mail, rest, everything) == (["m1", "m2"], [], ["m1"])
        wd.enqueue("m3", queue="q5", lane="mail")
        _run("m3")
        _run("s1")
        assert drain(mail_cursor, lane="mail")[0] == ["m3"]
        assert drain(rest_cursor, exclude_lane="mail")[0] == ["s1", "p1"]
        assert drain(all_cursor)[0] == ["s1", "m2", "p1", "m3"]


def _earlier(job_id: str) -> None:
    """Move ``job_id``'s settlement a second back: two settles a test makes in a row may
    share a timestamp (SQLite stamps whole milliseconds), and the order under test is the
    order in time."""
    Job.objects.filter(job_id=job_id).update(settled_at=F("settled_at") - timedelta(seconds=1))


class TestLatestSettled:
    def test_none_before_anything_settles(self) -> None:
        wd.enqueue("a", queue="q")
        assert wd.latest_settled("q") is None
        assert wd.latest_settled("unknown") is None

    def test_the_last_settled_job_of_the_queue(self) -> None:
        wd.enqueue("a", queue="q")
        wd.enqueue("b", queue="q")
        wd.enqueue("x", queue="other", priority=9)
        _run("x")
        _run("a")
        latest = wd.latest_settled("q")
        assert latest is not None and latest.job_id == "a"
        _run("b")
        latest = wd.latest_settled("q")
        assert latest is not None and latest.job_id == "b" and latest.outcome == "completed"

    # As the seed: the settled job enqueued last (highest position), not the one that
    # settled last. The cases below are those where a later job overtakes an earlier one.

    def test_a_higher_priority_job_that_overtook_stays_latest(self) -> None:
        wd.enqueue("low", queue="q")
        wd.enqueue("high", queue="q", priority=5)
        _run("high")
        _earlier("high")
        _run("low")  # settles last, but was enqueued first
        latest = wd.latest_settled("q")
        assert latest is not None and latest.job_id == "high"

    def test_a_cancelled_job_reached_before_its_predecessor_stays_latest(self) -> None:
        wd.enqueue("first", queue="q")
        wd.enqueue("second", queue="q")
        first = claimed()
        assert wd.cancel("second").status == "recorded"
        assert Store().claim().status == "cancelled"  # second, while first runs
        _earlier("second")
        Store().settle("first", first.claim_token or "", DONE)
        latest = wd.latest_settled("q")
        assert latest is not None and latest.job_id == "second"
        assert latest.outcome == "cancelled"

    def test_a_recovered_job_that_runs_after_a_later_job_does_not_become_latest(self) -> None:
        wd.enqueue("early", queue="q", max_recoveries=1)
        token = claimed().claim_token or ""
        wd.enqueue("late", queue="q", priority=5)
        assert Store().reconcile("early", token).status == "requeued"
        _run("late")
        _earlier("late")
        _run("early")  # back in its old place, settles last
        latest = wd.latest_settled("q")
        assert latest is not None and latest.job_id == "late"
