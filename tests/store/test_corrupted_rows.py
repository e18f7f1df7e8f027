"""Rows edited by hand into values Python cannot read (a timestamp past year 9999, as
PostgreSQL stores one) never stop the store: the job is quarantined (settled ``failed``
with a reason saying why, announced like every change) when a verb acts on it, and every
other job, the feed, ``fail_lane``, recovery and the admin go on."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

import django_watchdog as wd
from django_watchdog import WatchdogError
from django_watchdog.models import Job
from django_watchdog.store.store import Store

from .helpers import DONE, claim_ids

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        "connection.vendor != 'postgresql'",
        reason="SQLite keeps datetimes as text; its driver reads text that is no date as None",
    ),
]

FAR = "10000-01-01 00:00:00+00"
EARLY = "0001-01-01 00:00:00+05"  # year 0 in UTC


def _edit(job_id: str, column: str, value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE watchdog_job SET {column} = %s::timestamptz WHERE job_id = %s",  # noqa: S608
            [value, job_id],
        )


def _raw(job_id: str) -> tuple[str, str | None, str | None]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT state, outcome, failure_reason FROM watchdog_job WHERE job_id = %s", [job_id]
        )
        return cursor.fetchone()


@pytest.fixture(params=[("enqueued_at", FAR), ("run_after", FAR), ("run_after", EARLY)])
def bad_ready_job(request: pytest.FixtureRequest) -> str:
    """A ready job, best of its queue, whose timestamp column was edited out of range."""
    column, value = request.param
    wd.enqueue("bad", queue="q", lane="a", priority=5, payload={"ok": True})
    wd.enqueue("behind", queue="q", lane="a")
    wd.enqueue("good", queue="q2", lane="a")
    _edit("bad", column, value)
    return "bad"


def test_claim_quarantines_the_row_and_goes_on(bad_ready_job: str) -> None:
    with pytest.raises(WatchdogError) as caught:
        Store().claim()
    assert caught.value.kind == "store_unavailable"
    state, outcome, reason = _raw("bad")
    assert (state, outcome) == ("settled", "failed")
    assert reason is not None and reason.startswith("Job row does not decode")
    assert "out of range" in reason
    assert sorted(claim_ids()) == ["behind", "good"]


def test_reads_answer_around_the_row(bad_ready_job: str) -> None:
    good = wd.get_job("good")
    assert good is not None and good.job_id == "good"
    with pytest.raises(WatchdogError) as caught:
        wd.get_job("bad")
    assert caught.value.kind == "store_unavailable" and caught.value.job_id == "bad"
    assert wd.queue_head("q2").job_id == "good"
    assert wd.settled_jobs() == []


def test_the_feed_yields_the_quarantined_job(bad_ready_job: str) -> None:
    with pytest.raises(WatchdogError):
        Store().claim()
    records = wd.settled_jobs()
    assert [r.job.job_id for r in records] == ["bad"]
    assert records[0].job.outcome == "failed"
    assert records[0].job.failure_reason.startswith("Job row does not decode")


def test_fail_lane_settles_the_row(bad_ready_job: str) -> None:
    failure = wd.fail_lane("a", "lane retired")
    assert not failure.more
    assert sorted(job.job_id for job in failure.jobs) == ["bad", "behind", "good"]
    assert _raw("bad")[:2] == ("settled", "failed")
    assert [r.job.job_id for r in wd.settled_jobs()] == ["bad", "behind", "good"]


def test_a_delayed_job_past_year_9999_blocks_nothing() -> None:
    """As ``enqueue(run_after=datetime.max in a western zone)`` stored it before
    validation refused it."""
    wd.enqueue("later", queue="q", run_after=timezone.now() + timedelta(days=1))
    wd.enqueue("good", queue="q2")
    _edit("later", "run_after", FAR)
    assert Store().promote_due(now=timezone.now()) == 0
    assert Store().recover(timeout=30.0) == []
    assert claim_ids() == ["good"]
    with pytest.raises(WatchdogError):
        wd.get_job("later")
    assert [r.job.job_id for r in wd.settled_jobs()] == ["good"]
    assert wd.queue_head("q").state == "idle"
    failure = wd.fail_lane("default", "drop the delayed job")
    assert [job.job_id for job in failure.jobs] == ["later"]
    assert failure.jobs[0].run_after.year == 9999  # the nearest instant Python holds


def test_a_running_job_with_a_bad_timestamp_is_recovered() -> None:
    wd.enqueue("lost", queue="q")
    claim = Store().claim(worker_id="w-gone")
    assert claim.job is not None
    _edit("lost", "started_at", FAR)
    results = Store().recover(timeout=30.0)
    assert [r.status for r in results] == ["settled"]
    assert _raw("lost")[:2] == ("settled", "interrupted")


def test_settling_a_bad_running_row_settles_it() -> None:
    wd.enqueue("j", queue="q")
    claim = Store().claim()
    _edit("j", "started_at", FAR)
    result = Store().settle("j", claim.claim_token or "", DONE)[0]
    assert result.status == "settled"
    assert _raw("j")[:2] == ("settled", "completed")


def test_admin_changelist_lists_the_row(admin_client, bad_ready_job: str) -> None:
    page = admin_client.get(reverse("admin:django_watchdog_job_changelist"))
    assert page.status_code == 200
    assert b"good" in page.content and b"bad" in page.content
    pk = Job.objects.filter(job_id="bad").values_list("pk", flat=True).get()
    detail = admin_client.get(reverse("admin:django_watchdog_job_change", args=[pk]))
    assert detail.status_code == 200 and b"bad" in detail.content
