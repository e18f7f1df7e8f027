"""Serial queues, order and claim (SPEC §4.2–4.4)."""

from __future__ import annotations

import pytest

import django_watchdog as wd
from django_watchdog.models import Job
from django_watchdog.store.store import Partition, Store

from .helpers import DONE, claim_ids, claimed, row

pytestmark = pytest.mark.django_db


def test_nothing_to_claim() -> None:
    assert Store().claim().status == "none"


def test_claim_marks_running_with_a_fresh_token() -> None:
    wd.enqueue("a", queue="q", max_recoveries=1)
    result = claimed(worker_id="w1")
    assert result.job is not None and result.job.job_id == "a"
    assert result.job.state == "running" and result.job.started_at is not None
    stored = row("a")
    assert stored["claim_token"] == result.claim_token
    assert stored["claimed_by"] == "w1"
    assert stored["ready"] is False
    assert len(result.claim_token or "") >= 32  # unguessable: 24 random bytes

    # Recovered and claimed again: a different token.
    assert Store().reconcile("a", result.claim_token or "").status == "requeued"
    again = claimed()
    assert again.claim_token != result.claim_token


def test_queue_runs_one_job_at_a_time() -> None:
    wd.enqueue("a", queue="q")
    wd.enqueue("b", queue="q")
    first = claimed()
    assert first.job is not None and first.job.job_id == "a"
    assert Store().claim().status == "none"  # b waits for a
    assert wd.queue_head("q").state == "running"
    Store().settle("a", first.claim_token or "", DONE)
    second = claimed()
    assert second.job is not None and second.job.job_id == "b"


def test_different_queues_run_in_parallel() -> None:
    wd.enqueue("a", queue="q1")
    wd.enqueue("b", queue="q2")
    assert {claimed().job.job_id, claimed().job.job_id} == {"a", "b"}  # type: ignore[union-attr]
    assert Job.objects.filter(state="running").count() == 2


def test_order_within_a_queue_is_priority_then_enqueue_order() -> None:
    for job_id, priority in [("a", 0), ("b", 5), ("c", 0), ("d", 5), ("e", -1), ("f", 9)]:
        wd.enqueue(job_id, queue="q", priority=priority)
    assert claim_ids() == ["f", "b", "d", "a", "c", "e"]


def test_a_later_higher_priority_job_overtakes_the_queued_head() -> None:
    wd.enqueue("a", queue="q")
    assert wd.queue_head("q").job_id == "a"
    wd.enqueue("b", queue="q", priority=1)
    assert wd.queue_head("q").job_id == "b"
    assert (row("a")["ready"], row("b")["ready"]) == (False, True)
    assert claim_ids() == ["b", "a"]


def test_a_job_enqueued_while_the_queue_runs_waits_even_with_higher_priority() -> None:
    wd.enqueue("a", queue="q")
    running = claimed()
    wd.enqueue("b", queue="q", priority=100)
    assert Store().claim().status == "none"
    Store().settle("a", running.claim_token or "", DONE)
    assert claim_ids() == ["b"]


def test_across_queues_highest_priority_then_oldest_is_claimed_first() -> None:
    wd.enqueue("a", queue="q1", priority=1)
    wd.enqueue("b", queue="q2", priority=7)
    wd.enqueue("c", queue="q3", priority=7)
    wd.enqueue("d", queue="q4", priority=-7)
    order = [claimed().job.job_id for _ in range(4)]  # type: ignore[union-attr]
    assert order == ["b", "c", "a", "d"]


def test_only_each_queues_head_competes_across_queues() -> None:
    # q1's second job has the highest priority of all, but q1's head runs first.
    wd.enqueue("q1-head", queue="q1", priority=10)
    wd.enqueue("q1-next", queue="q1", priority=1)
    wd.enqueue("q2-head", queue="q2", priority=5)
    order = [claimed().job.job_id for _ in range(2)]  # type: ignore[union-attr]
    assert order == ["q1-head", "q2-head"]
    assert Store().claim().status == "none"


def test_cancelled_queued_job_is_ready_at_once_and_settles_without_running() -> None:
    wd.enqueue("a", queue="q")
    wd.enqueue("b", queue="q")
    wd.enqueue("c", queue="q")
    running = claimed()
    assert running.job is not None and running.job.job_id == "a"
    assert wd.cancel("c").status == "recorded"
    # c skips the queue order, even while a runs and b is ahead of it.
    reached = Store().claim()
    assert reached.status == "cancelled"
    assert reached.claim_token is None
    assert reached.job is not None and reached.job.job_id == "c"
    stored = row("c")
    assert (stored["state"], stored["outcome"], stored["started_at"]) == (
        "settled",
        "cancelled",
        None,
    )
    assert stored["settled_at"] is not None
    assert row("a")["state"] == "running"
    assert Store().claim().status == "none"  # b still waits for a
    Store().settle("a", running.claim_token or "", DONE)
    assert claim_ids() == ["b"]


def test_cancelled_head_is_reached_before_a_lower_job_runs() -> None:
    wd.enqueue("a", queue="q", priority=1)
    wd.enqueue("b", queue="q")
    wd.cancel("a")
    assert Store().claim().status == "cancelled"
    assert claim_ids() == ["b"]


class TestLanePartitions:
    @pytest.fixture(autouse=True)
    def jobs(self) -> None:
        wd.enqueue("mail-1", queue="q1", lane="mail", priority=1)
        wd.enqueue("sms-1", queue="q2", lane="sms", priority=2)
        wd.enqueue("push-1", queue="q3", lane="push", priority=3)

    def test_all_lanes(self) -> None:
        assert claim_ids() == ["push-1", "sms-1", "mail-1"]

    def test_include_one_lane(self) -> None:
        assert claim_ids(lanes=["mail"]) == ["mail-1"]
        assert row("sms-1")["state"] == "queued"

    def test_include_several_lanes(self) -> None:
        assert claim_ids(lanes=["mail", "sms"]) == ["sms-1", "mail-1"]

    def test_exclude_lanes(self) -> None:
        assert claim_ids(exclude_lanes=["push"]) == ["sms-1", "mail-1"]
        assert claim_ids(exclude_lanes=["push", "sms"]) == []
        assert row("push-1")["state"] == "queued"

    def test_include_and_exclude(self) -> None:
        assert claim_ids(lanes=["mail", "sms"], exclude_lanes=["sms"]) == ["mail-1"]

    def test_unknown_lane_claims_nothing(self) -> None:
        assert Store().claim(Partition(lanes=["nobody"])).status == "none"

    def test_head_of_another_lane_blocks_the_queue(self) -> None:
        # A queue is serial across lanes: its head is in lane mail, so the sms job waits.
        wd.enqueue("mail-2", queue="shared", lane="mail", priority=9)
        wd.enqueue("sms-2", queue="shared", lane="sms", priority=9)
        assert claim_ids(lanes=["sms"]) == ["sms-1"]
        assert row("sms-2")["state"] == "queued"
        assert claim_ids(lanes=["mail"]) == ["mail-2", "mail-1"]
        assert claim_ids(lanes=["sms"]) == ["sms-2"]
