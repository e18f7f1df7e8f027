"""Cancellation intents (SPEC §4.7): recorded / replayed / conflict / missing."""

from __future__ import annotations

import pytest

import django_watchdog as wd
from django_watchdog.domain.values import Decision
from django_watchdog.store.store import Store

from .helpers import DONE, claimed, row, snapshot

pytestmark = pytest.mark.django_db


def test_missing_job() -> None:
    result = wd.cancel("nobody")
    assert result.status == "missing"
    assert result.cancellation_id == "cancel:nobody"
    assert snapshot()["job"] == []


def test_default_intent_is_derived_from_the_job_id_so_a_repeat_replays() -> None:
    wd.enqueue("j", queue="q")
    first = wd.cancel("j")
    assert (first.status, first.cancellation_id) == ("recorded", "cancel:j")
    before = snapshot()
    assert wd.cancel("j").status == "replayed"
    assert snapshot() == before


def test_explicit_intent_replays_and_another_conflicts() -> None:
    wd.enqueue("j", queue="q")
    assert wd.cancel("j", cancellation_id="c-1").status == "recorded"
    before = snapshot()
    assert wd.cancel("j", cancellation_id="c-1").status == "replayed"
    assert wd.cancel("j", cancellation_id="c-2").status == "conflict"
    assert wd.cancel("j").status == "conflict"
    assert snapshot() == before
    assert row("j")["cancellation_id"] == "c-1"


def test_queued_job_with_an_intent_becomes_ready_and_settles_cancelled_when_reached() -> None:
    wd.enqueue("head", queue="q", priority=1)
    wd.enqueue("j", queue="q")
    assert row("j")["ready"] is False
    wd.cancel("j")
    assert row("j")["ready"] is True
    assert row("j")["state"] == "queued"  # recorded, not yet reached
    # Both are ready now; the claim order across ready jobs is still priority first.
    head = claimed()
    assert head.job is not None and head.job.job_id == "head"
    reached = Store().claim()
    assert reached.status == "cancelled"
    assert reached.job is not None and reached.job.job_id == "j"
    assert row("j")["outcome"] == "cancelled"


def test_only_if_queued_records_on_a_queued_job() -> None:
    wd.enqueue("j", queue="q")
    assert wd.cancel("j", only_if_queued=True).status == "recorded"


def test_only_if_queued_conflicts_on_a_running_job_and_writes_nothing() -> None:
    wd.enqueue("j", queue="q")
    claim = claimed()
    before = snapshot()
    assert wd.cancel("j", only_if_queued=True).status == "conflict"
    assert snapshot() == before
    assert Store().settle("j", claim.claim_token or "", DONE)[0].job.outcome == "completed"  # type: ignore[union-attr]


def test_only_if_queued_conflicts_on_a_settled_job() -> None:
    wd.enqueue("j", queue="q")
    claim = claimed()
    Store().settle("j", claim.claim_token or "", DONE)
    assert wd.cancel("j", only_if_queued=True).status == "conflict"
    assert row("j")["cancellation_id"] is None


def test_only_if_queued_still_replays_a_recorded_intent() -> None:
    wd.enqueue("j", queue="q")
    wd.cancel("j")
    claimed_or_cancelled = Store().claim()
    assert claimed_or_cancelled.status == "cancelled"
    assert wd.cancel("j", only_if_queued=True).status == "replayed"


def test_running_job_sees_the_intent_and_settles_cancelled() -> None:
    wd.enqueue("j", queue="q")
    claim = claimed()
    assert wd.cancel("j").status == "recorded"
    assert row("j")["state"] == "running"  # cooperative: it keeps running
    head = wd.queue_head("q")
    assert (head.state, head.job_id, head.cancellation_requested) == ("running", "j", True)
    result = Store().settle("j", claim.claim_token or "", Decision.completed("done"))[0]
    assert result.job is not None and result.job.outcome == "cancelled"


def test_intent_on_a_settled_job_is_recorded_and_changes_no_outcome() -> None:
    wd.enqueue("j", queue="q")
    claim = claimed()
    Store().settle("j", claim.claim_token or "", DONE)
    assert wd.cancel("j").status == "recorded"
    assert (row("j")["state"], row("j")["outcome"]) == ("settled", "completed")


def test_default_intent_of_a_256_character_job_id_fits_and_replays() -> None:
    job_id = "j" * 256
    wd.enqueue(job_id, queue="q")
    first = wd.cancel(job_id)
    assert first.status == "recorded"
    # Within the 1–256 characters of every identifier, so the row still loads.
    assert 1 <= len(first.cancellation_id) <= 256
    assert row(job_id)["cancellation_id"] == first.cancellation_id
    before = snapshot()
    again = wd.cancel(job_id)
    assert (again.status, again.cancellation_id) == ("replayed", first.cancellation_id)
    assert snapshot() == before
    job = wd.get_job(job_id)
    assert job is not None and job.cancellation_id == first.cancellation_id


def test_default_intents_of_long_job_ids_differ_and_short_ones_keep_their_form() -> None:
    assert wd.cancel("short").cancellation_id == "cancel:short"
    assert wd.cancel("x" * 249).cancellation_id == "cancel:" + "x" * 249  # 256: as before
    long_ids = ["a" * 256, "a" * 255 + "b", "a" * 250]
    derived = {wd.cancel(job_id).cancellation_id for job_id in long_ids}
    assert len(derived) == 3
    assert all(len(cancellation_id) <= 256 for cancellation_id in derived)


def test_an_intent_id_recorded_on_another_job_conflicts_and_writes_nothing() -> None:
    wd.enqueue("a", queue="q1")
    wd.enqueue("b", queue="q2")
    assert wd.cancel("a", cancellation_id="shared").status == "recorded"
    before = snapshot()
    assert wd.cancel("b", cancellation_id="shared").status == "conflict"
    assert snapshot() == before
    assert row("b")["cancellation_id"] is None
    # The job can still take another intent.
    assert wd.cancel("b", cancellation_id="own").status == "recorded"
