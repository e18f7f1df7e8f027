"""Lane failure (SPEC §4.9) and purge (SPEC §4.10)."""

from __future__ import annotations

import pytest

import django_watchdog as wd
from django_watchdog.models import Job
from django_watchdog.store.store import Store

from .helpers import DONE, claim_ids, claimed, row, snapshot

pytestmark = pytest.mark.django_db


class TestFailLane:
    def test_settles_queued_and_running_jobs_of_the_lane_only(self) -> None:
        wd.enqueue("run", queue="q1", lane="mail")
        token = claimed().claim_token or ""
        wd.enqueue("wait", queue="q1", lane="mail")
        wd.enqueue("other-lane", queue="q1", lane="sms")
        wd.enqueue("elsewhere", queue="q2", lane="mail")
        wd.enqueue("sms", queue="q3", lane="sms")

        failure = wd.fail_lane("mail", "SMTP relay is gone")
        assert failure.more is False
        # Running jobs first, then queued ones in enqueue order.
        assert [job.job_id for job in failure.jobs] == ["run", "wait", "elsewhere"]
        for job in failure.jobs:
            assert (job.state, job.outcome, job.failure_reason) == (
                "settled",
                "failed",
                "SMTP relay is gone",
            )
            assert job.settled_at is not None
            assert row(job.job_id)["claim_token"] is None
            assert row(job.job_id)["ready"] is False
        assert row("other-lane")["state"] == "queued"
        assert row("sms")["state"] == "queued"

        # The running job's worker comes back later: its settle is a conflict.
        before = snapshot()
        assert Store().settle("run", token, DONE)[0].status == "conflict"
        assert snapshot() == before
        # The queue moved on to its next job in another lane.
        assert wd.queue_head("q1").job_id == "other-lane"
        assert claim_ids() == ["other-lane", "sms"]

    def test_nothing_pending_in_the_lane(self) -> None:
        wd.enqueue("a", queue="q", lane="sms")
        failure = wd.fail_lane("mail", "gone")
        assert (failure.jobs, failure.more) == ((), False)
        assert row("a")["state"] == "queued"

    def test_settled_jobs_are_left_alone(self) -> None:
        wd.enqueue("a", queue="q", lane="mail")
        Store().settle("a", claimed().claim_token or "", DONE)
        assert wd.fail_lane("mail", "gone").jobs == ()
        assert row("a")["outcome"] == "completed"

    def test_works_in_batches_of_256_and_reports_more(self) -> None:
        for index in range(259):
            wd.enqueue(f"j{index:03}", queue=f"q{index % 7}", lane="mail")
        running = {claimed().job.job_id for _ in range(3)}  # type: ignore[union-attr]

        first = wd.fail_lane("mail", "gone")
        assert len(first.jobs) == 256 and first.more is True
        assert {job.job_id for job in first.jobs[:3]} == running  # running first
        assert Job.objects.filter(state__in=["queued", "running"]).count() == 3

        second = wd.fail_lane("mail", "gone")
        assert len(second.jobs) == 3 and second.more is False
        assert Job.objects.filter(outcome="failed", failure_reason="gone").count() == 259
        assert wd.fail_lane("mail", "gone").jobs == ()

    def test_a_cancelled_queued_job_fails_too(self) -> None:
        wd.enqueue("a", queue="q", lane="mail")
        wd.cancel("a")
        failure = wd.fail_lane("mail", "gone")
        assert [job.outcome for job in failure.jobs] == ["failed"]


class TestPurge:
    def test_deletes_only_the_queues_queued_jobs(self) -> None:
        wd.enqueue("done", queue="q")
        Store().settle("done", claimed().claim_token or "", DONE)
        wd.enqueue("run", queue="q")
        token = claimed().claim_token or ""
        wd.enqueue("w1", queue="q")
        wd.enqueue("w2", queue="q", lane="sms")
        wd.enqueue("other", queue="q2")

        assert wd.purge_queued("q") == 2
        assert wd.get_job("w1") is None and wd.get_job("w2") is None
        assert row("run")["state"] == "running"
        assert row("done")["state"] == "settled"
        assert row("other")["state"] == "queued"
        assert wd.queue_head("q").job_id == "run"
        Store().settle("run", token, DONE)
        assert wd.queue_head("q").state == "idle"
        assert claim_ids() == ["other"]

    def test_empty_or_unknown_queue(self) -> None:
        assert wd.purge_queued("nothing-here") == 0
        wd.enqueue("a", queue="q")
        Store().settle("a", claimed().claim_token or "", DONE)
        before = snapshot()
        assert wd.purge_queued("q") == 0
        assert snapshot() == before

    def test_purged_id_can_be_enqueued_again(self) -> None:
        wd.enqueue("a", queue="q", priority=1)
        wd.purge_queued("q")
        assert wd.enqueue("a", queue="q", priority=2).status == "queued"
        assert claim_ids() == ["a"]

    def test_purge_removes_cancelled_queued_jobs(self) -> None:
        wd.enqueue("a", queue="q")
        wd.cancel("a")
        assert wd.purge_queued("q") == 1
        assert Store().claim().status == "none"
