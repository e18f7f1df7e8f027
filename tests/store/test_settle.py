"""Settle with fencing (SPEC §4.5): settled / replayed / conflict / missing."""

from __future__ import annotations

import pytest

import django_watchdog as wd
from django_watchdog.domain.states import Outcome
from django_watchdog.domain.values import Decision
from django_watchdog.store.store import Store

from .helpers import DONE, claimed, row, snapshot

pytestmark = pytest.mark.django_db


@pytest.fixture
def token() -> str:
    wd.enqueue("j", queue="q")
    wd.enqueue("next", queue="q")
    return claimed().claim_token or ""


@pytest.mark.parametrize(
    ("decision", "outcome", "reason"),
    [
        (Decision.completed({"sent": 2}), "completed", None),
        (Decision.failed("ValueError: bad", traceback="Traceback..."), "failed", "ValueError: bad"),
        (Decision.outcome_unknown(traceback="tb"), "outcome_unknown", None),
    ],
)
def test_holder_of_the_token_settles(
    token: str, decision: Decision, outcome: str, reason: str | None
) -> None:
    result = Store().settle("j", token, decision)[0]
    assert result.status == "settled"
    assert result.job is not None
    assert (result.job.state, result.job.outcome, result.job.failure_reason) == (
        "settled",
        outcome,
        reason,
    )
    assert result.job.result == decision.result
    assert result.job.traceback == decision.traceback
    assert result.job.settled_at is not None
    assert wd.queue_head("q").job_id == "next"
    assert row("next")["ready"] is True


def test_failed_without_a_reason_gets_one(token: str) -> None:
    result = Store().settle("j", token, Decision(outcome=Outcome.FAILED))[0]
    assert result.job is not None and result.job.failure_reason == "Failed without a reason"


def test_same_token_same_outcome_is_replayed_and_changes_nothing(token: str) -> None:
    Store().settle("j", token, Decision.completed(1))
    before = snapshot()
    again = Store().settle("j", token, Decision.completed(2))[0]
    assert again.status == "replayed"
    assert again.job is not None and again.job.result == 1
    assert snapshot() == before


@pytest.mark.parametrize(
    "second", [Decision.failed("E: x"), Decision.outcome_unknown()], ids=["failed", "unknown"]
)
def test_same_token_other_outcome_is_a_conflict(token: str, second: Decision) -> None:
    Store().settle("j", token, DONE)
    before = snapshot()
    result = Store().settle("j", token, second)[0]
    assert result.status == "conflict" and result.job is None
    assert snapshot() == before


def test_wrong_token_while_running_is_a_conflict(token: str) -> None:
    before = snapshot()
    assert Store().settle("j", "not-the-token", DONE)[0].status == "conflict"
    assert snapshot() == before
    assert Store().settle("j", token, DONE)[0].status == "settled"


def test_wrong_token_after_settle_is_a_conflict(token: str) -> None:
    Store().settle("j", token, DONE)
    assert Store().settle("j", "not-the-token", DONE)[0].status == "conflict"


def test_settling_a_queued_job_is_a_conflict(token: str) -> None:
    before = snapshot()
    assert Store().settle("next", token, DONE)[0].status == "conflict"
    assert snapshot() == before
    assert row("next")["state"] == "queued"


def test_unknown_job_is_missing() -> None:
    result = Store().settle("nobody", "token", DONE)[0]
    assert result.status == "missing" and result.job is None


def test_purged_job_is_missing(token: str) -> None:
    wd.purge_queued("q")
    assert Store().settle("next", token, DONE)[0].status == "missing"


@pytest.mark.parametrize(
    "decision",
    [Decision.completed(5), Decision.failed("E: x"), Decision.outcome_unknown()],
    ids=["completed", "failed", "unknown"],
)
def test_recorded_cancellation_overrides_the_handlers_decision(
    token: str, decision: Decision
) -> None:
    assert wd.cancel("j").status == "recorded"
    assert wd.queue_head("q").cancellation_requested is True
    result = Store().settle("j", token, decision)[0]
    assert result.status == "settled"
    assert result.job is not None
    assert (result.job.outcome, result.job.failure_reason) == ("cancelled", None)
    # Any decision replays now: the effective outcome is cancelled whatever was decided.
    assert Store().settle("j", token, DONE)[0].status == "replayed"
    assert Store().settle("j", token, Decision.failed("E: y"))[0].status == "replayed"


def test_settle_does_not_touch_other_jobs(token: str) -> None:
    wd.enqueue("other", queue="elsewhere")
    before = row("other")
    Store().settle("j", token, DONE)
    assert row("other") == before
