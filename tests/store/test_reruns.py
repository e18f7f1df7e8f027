"""Re-run: a settled failed, interrupted or cancelled job runs again as a new, linked job."""

from __future__ import annotations

import pytest

import django_watchdog as wd
from django_watchdog.domain.retries import RetryPolicy
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job
from django_watchdog.store.store import Store

from .helpers import DONE, claimed, row, snapshot

pytestmark = pytest.mark.django_db


def settle(job_id: str, decision: Decision) -> None:
    claim = claimed()
    assert claim.job.job_id == job_id
    assert Store().settle(job_id, claim.claim_token, decision)[0].status == "settled"


@pytest.fixture
def failed() -> Job:
    wd.enqueue(
        "build-7",
        queue="builds",
        lane="ci",
        priority=5,
        payload={"ref": "main", "n": [1, 2]},
        max_recoveries=2,
        retry=RetryPolicy(max_attempts=1),
        timeout=30.0,
    )
    settle("build-7", Decision.failed("ValueError: boom"))
    return Job.objects.get(job_id="build-7")


def test_a_rerun_is_a_new_job_with_the_originals_work(failed: Job) -> None:
    before = row("build-7")
    result = wd.rerun("build-7", requested_by="admin:ann")
    assert result.status == "queued"
    new = Job.objects.get(job_id="build-7~rerun-1")
    assert (new.queue, new.lane, new.priority, new.payload, new.max_recoveries) == (
        "builds",
        "ci",
        5,
        {"ref": "main", "n": [1, 2]},
        2,
    )
    assert (new.retry_policy, new.timeout) == (failed.retry_policy, 30.0)
    assert (new.state, new.rerun_of, new.rerun_requested_by) == ("queued", "build-7", "admin:ann")
    assert result.job.pk == new.pk and result.job.rerun_of == "build-7"
    assert row("build-7") == before  # the original stays settled, untouched
    assert wd.queue_head("builds").job_id == "build-7~rerun-1"


def test_a_repeat_of_the_same_rerun_returns_the_same_job(failed: Job) -> None:
    first = wd.rerun("build-7", rerun_id="retry-after-fix")
    before = snapshot()
    again = wd.rerun("build-7", rerun_id="retry-after-fix")
    assert (first.status, again.status) == ("queued", "duplicate")
    assert again.job.pk == first.job.pk
    assert snapshot() == before


def test_each_plain_rerun_takes_the_next_number(failed: Job) -> None:
    assert wd.rerun("build-7").job.job_id == "build-7~rerun-1"
    assert wd.rerun("build-7").job.job_id == "build-7~rerun-2"
    assert set(Job.objects.filter(rerun_of="build-7").values_list("job_id", flat=True)) == {
        "build-7~rerun-1",
        "build-7~rerun-2",
    }


def test_a_derived_id_for_a_long_job_id_fits() -> None:
    long_id = "x" * 256
    wd.enqueue(long_id, queue="q")
    assert wd.cancel(long_id).status == "recorded"
    assert Store().claim().status == "cancelled"
    new = wd.rerun(long_id).job
    assert new.job_id.startswith("rerun#sha256:") and new.job_id.endswith("~1")
    assert len(new.job_id) <= 256 and new.rerun_of == long_id


@pytest.mark.parametrize("outcome", ["interrupted", "cancelled"])
def test_interrupted_and_cancelled_jobs_can_be_rerun(outcome: str) -> None:
    wd.enqueue("j", queue="q")
    if outcome == "cancelled":
        wd.cancel("j")
        assert Store().claim().status == "cancelled"
    else:
        claim = claimed()
        assert Store().reconcile("j", claim.claim_token).status == "settled"
    assert row("j")["outcome"] == outcome
    assert wd.rerun("j").status == "queued"


@pytest.mark.parametrize("state", ["queued", "running", "completed", "outcome_unknown"])
def test_only_settled_unsuccessful_jobs_can_be_rerun(state: str) -> None:
    wd.enqueue("j", queue="q")
    if state != "queued":
        claim = claimed()
        if state == "completed":
            Store().settle("j", claim.claim_token, DONE)
        elif state == "outcome_unknown":
            Store().settle("j", claim.claim_token, Decision.outcome_unknown())
    before = snapshot()
    with pytest.raises(wd.InvalidInput, match=r"job_id: job 'j' is .*only a settled failed"):
        wd.rerun("j")
    assert snapshot() == before


def test_a_missing_job_or_bad_argument_is_invalid_input_naming_it(failed: Job) -> None:
    before = snapshot()
    with pytest.raises(wd.InvalidInput, match="job_id: no job 'nobody'"):
        wd.rerun("nobody")
    with pytest.raises(wd.InvalidInput, match="rerun_id"):
        wd.rerun("build-7", rerun_id="")
    with pytest.raises(wd.InvalidInput, match="requested_by"):
        wd.rerun("build-7", requested_by=7)  # type: ignore[arg-type]
    with pytest.raises(wd.InvalidInput, match="job_id"):
        wd.rerun(None)  # type: ignore[arg-type]
    assert snapshot() == before


def test_a_rerun_id_another_job_holds_is_a_conflict(failed: Job) -> None:
    wd.enqueue("other", queue="builds", lane="ci")
    before = snapshot()
    with pytest.raises(wd.JobConflict):
        wd.rerun("build-7", rerun_id="other")
    with pytest.raises(wd.JobConflict, match="rerun_of"):
        wd.rerun("build-7", rerun_id="build-7")  # the original itself
    assert snapshot() == before


def test_the_settled_feed_yields_original_and_rerun_once_each(failed: Job) -> None:
    wd.rerun("build-7")
    settle("build-7~rerun-1", DONE)
    cursor = None
    seen = []
    while batch := wd.settled_jobs(after=cursor):
        seen += [r.job.job_id for r in batch]
        cursor = batch[-1].cursor
    assert seen == ["build-7", "build-7~rerun-1"]


def test_cancel_records_who_asked() -> None:
    wd.enqueue("j", queue="q")
    assert wd.cancel("j", requested_by="cli:ops").status == "recorded"
    assert wd.cancel("j", requested_by="admin:other").status == "replayed"
    assert Job.objects.get(job_id="j").cancellation_requested_by == "cli:ops"
    with pytest.raises(wd.InvalidInput, match="requested_by"):
        wd.cancel("j", requested_by="x" * 151)
