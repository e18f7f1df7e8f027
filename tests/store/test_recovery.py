"""Recovery of disappeared executions (SPEC §4.8): reconcile and recover."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.models import Worker
from django_watchdog.store.store import Store

from .helpers import DONE, claim_ids, claimed, row, snapshot

pytestmark = pytest.mark.django_db

NO_POLICY = "Execution disappeared without a recovery policy"


def _claim(job_id: str, **partition: str) -> str:
    result = claimed(**partition)
    assert result.job is not None and result.job.job_id == job_id
    return result.claim_token or ""


def test_budget_left_requeues_keeping_its_place() -> None:
    wd.enqueue("a", queue="q", max_recoveries=2)
    token = _claim("a")
    wd.enqueue("b", queue="q")
    wd.enqueue("c", queue="q", priority=1)
    assert Store().reconcile("a", token).status == "requeued"
    # Its place is its own priority and enqueue order: after c (higher), before b (later).
    assert claim_ids() == ["c", "a", "b"]


def test_requeue_keeps_place_and_counts() -> None:
    wd.enqueue("a", queue="q", max_recoveries=2)
    token = _claim("a")
    wd.enqueue("b", queue="q")
    result = Store().reconcile("a", token)
    assert result.status == "requeued"
    assert result.job is not None
    assert (result.job.state, result.job.recovery_count, result.job.outcome) == ("queued", 1, None)
    stored = row("a")
    assert (stored["claim_token"], stored["claimed_by"], stored["started_at"]) == (None, None, None)
    # Still ahead of b, which was enqueued after it.
    assert wd.queue_head("q").job_id == "a"
    assert claim_ids() == ["a", "b"]


def test_zombie_settle_after_requeue_is_a_conflict() -> None:
    wd.enqueue("a", queue="q", max_recoveries=1)
    old = _claim("a")
    Store().reconcile("a", old)
    assert Store().settle("a", old, DONE)[0].status == "conflict"  # queued again
    new = _claim("a")
    assert Store().settle("a", old, DONE)[0].status == "conflict"  # another claim runs it
    assert Store().settle("a", new, DONE)[0].status == "settled"
    assert Store().settle("a", old, DONE)[0].status == "conflict"  # settled by another


def test_budget_counts_each_recovery_then_is_exhausted() -> None:
    wd.enqueue("a", queue="q", max_recoveries=2)
    for expected in (1, 2):
        result = Store().reconcile("a", _claim("a"))
        assert (result.status, result.job.recovery_count) == ("requeued", expected)  # type: ignore[union-attr]
    token = _claim("a")
    result = Store().reconcile("a", token)
    assert result.status == "settled"
    assert result.job is not None
    assert (result.job.outcome, result.job.failure_reason, result.job.recovery_count) == (
        "interrupted",
        "Restart recovery budget exhausted (2 recoveries)",
        2,
    )
    assert Store().settle("a", token, DONE)[0].status == "conflict"


def test_zero_budget_is_exhausted_at_once() -> None:
    wd.enqueue("a", queue="q", max_recoveries=0)
    result = Store().reconcile("a", _claim("a"))
    assert result.job is not None
    assert result.job.failure_reason == "Restart recovery budget exhausted (0 recoveries)"


def test_no_policy_is_interrupted() -> None:
    wd.enqueue("a", queue="q")
    wd.enqueue("b", queue="q")
    token = _claim("a")
    result = Store().reconcile("a", token)
    assert result.status == "settled"
    assert result.job is not None
    assert (result.job.outcome, result.job.failure_reason, result.job.recovery_count) == (
        "interrupted",
        NO_POLICY,
        0,
    )
    assert wd.queue_head("q").job_id == "b"  # the queue moves on
    assert Store().settle("a", token, DONE)[0].status == "conflict"


@pytest.mark.parametrize("budget", [None, 0, 5])
def test_recorded_cancellation_settles_cancelled_whatever_the_budget(budget: int | None) -> None:
    wd.enqueue("a", queue="q", max_recoveries=budget)
    token = _claim("a")
    wd.cancel("a")
    result = Store().reconcile("a", token)
    assert result.status == "settled"
    assert result.job is not None
    assert (result.job.outcome, result.job.failure_reason, result.job.recovery_count) == (
        "cancelled",
        None,
        0,
    )


def test_reconcile_happens_exactly_once() -> None:
    wd.enqueue("a", queue="q", max_recoveries=3)
    token = _claim("a")
    assert Store().reconcile("a", token).status == "requeued"
    before = snapshot()
    assert Store().reconcile("a", token).status == "conflict"
    assert snapshot() == before
    assert row("a")["recovery_count"] == 1


def test_reconcile_with_a_wrong_token_or_state_is_a_conflict() -> None:
    wd.enqueue("a", queue="q")
    wd.enqueue("b", queue="q")
    token = _claim("a")
    before = snapshot()
    assert Store().reconcile("a", "stale").status == "conflict"
    assert Store().reconcile("b", token).status == "conflict"  # queued
    assert snapshot() == before
    Store().settle("a", token, DONE)
    assert Store().reconcile("a", token).status == "conflict"  # settled


def test_reconcile_missing_job() -> None:
    result = Store().reconcile("nobody", "token")
    assert (result.status, result.job) == ("missing", None)


class TestRecover:
    """``recover`` finds claims whose worker has no fresh heartbeat and reconciles each.

    Heartbeats are judged on the database's clock; the test database runs on this host, so
    ``timezone.now()`` is that clock here.
    """

    def _worker(self, worker_id: str, age: float) -> None:
        now = timezone.now()
        Worker.objects.create(
            worker_id=worker_id,
            host="h",
            pid=1,
            started_at=now - timedelta(hours=1),
            heartbeat_at=now - timedelta(seconds=age),
        )

    def _recover(self) -> dict[str, str]:
        results = Store().recover(timeout=30)
        return {r.job.job_id: r.status for r in results}  # type: ignore[union-attr]

    def test_live_worker_keeps_its_claim(self) -> None:
        self._worker("alive", age=5)
        wd.enqueue("a", queue="q", max_recoveries=1)
        claimed(worker_id="alive")
        assert self._recover() == {}
        assert row("a")["state"] == "running"

    def test_stale_heartbeat_is_recovered(self) -> None:
        self._worker("stale", age=31)
        wd.enqueue("a", queue="q1", max_recoveries=1)
        wd.enqueue("b", queue="q2")
        claimed(worker_id="stale")
        claimed(worker_id="stale")
        assert self._recover() == {"a": "requeued", "b": "settled"}
        assert row("a")["recovery_count"] == 1
        assert (row("b")["outcome"], row("b")["failure_reason"]) == ("interrupted", NO_POLICY)

    def test_absent_worker_row_and_no_worker_are_recovered(self) -> None:
        wd.enqueue("a", queue="q1", max_recoveries=1)
        wd.enqueue("b", queue="q2", max_recoveries=1)
        claimed(worker_id="vanished")
        claimed()  # claimed_by NULL: never live
        assert self._recover() == {"a": "requeued", "b": "requeued"}

    def test_mixed_workers_and_a_second_pass_finds_nothing(self) -> None:
        self._worker("alive", age=0)
        self._worker("dead", age=600)
        wd.enqueue("a", queue="q1", max_recoveries=1)
        wd.enqueue("b", queue="q2", max_recoveries=1)
        claimed(worker_id="alive")
        claimed(worker_id="dead")
        assert self._recover() == {"b": "requeued"}
        assert self._recover() == {}
        assert row("a")["state"] == "running"

    def test_recovered_job_is_claimable_again(self) -> None:
        wd.enqueue("a", queue="q", max_recoveries=1)
        old = claimed(worker_id="dead").claim_token or ""
        self._recover()
        new = _claim("a")
        assert Store().settle("a", old, DONE)[0].status == "conflict"
        assert Store().settle("a", new, DONE)[0].status == "settled"


def test_zombie_of_a_cancelled_reconciled_job_replays_and_changes_nothing() -> None:
    """Rule 5 reading: the effective outcome is ``cancelled`` whatever the zombie decided,
    and the job settled ``cancelled`` under the zombie's token, so it is a replay (as in the
    reference store), never an overwrite."""
    wd.enqueue("a", queue="q", max_recoveries=1)
    token = _claim("a")
    wd.cancel("a")
    Store().reconcile("a", token)
    before = snapshot()
    assert Store().settle("a", token, DONE)[0].status == "replayed"
    assert snapshot() == before
