"""``watchdog_worker --burst`` drains a mixed workload and respects lanes."""

import pytest

import django_watchdog as wd
from django_watchdog.models import Job, Worker

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def test_burst_drains_a_mixed_workload_and_exits_zero(spawn_worker, runs):
    wd.enqueue("ok", queue="a", lane="t-record", payload={"result": {"n": 1}})
    wd.enqueue("fails", queue="b", lane="t-fail", payload={"message": "no disk"})
    wd.enqueue("unknown", queue="c", lane="t-unknown")
    wd.enqueue("running-first", queue="d", lane="t-record", payload={"sleep": 0.2})
    wd.enqueue("cancelled", queue="d", lane="t-record")
    assert wd.cancel("cancelled").status == "recorded"

    worker = spawn_worker("--burst", "--concurrency", "2")
    assert worker.wait() == 0, worker.output()

    outcomes = dict(Job.objects.values_list("job_id", "outcome"))
    assert outcomes == {
        "ok": "completed",
        "fails": "failed",
        "unknown": "outcome_unknown",
        "running-first": "completed",
        "cancelled": "cancelled",
    }
    assert wd.get_job("ok").result == {"n": 1}
    failed = wd.get_job("fails")
    assert failed.failure_reason == "ValueError: no disk"
    assert "Traceback" in failed.traceback and "no disk" in failed.traceback
    assert "OutcomeUnknown" in wd.get_job("unknown").traceback
    # The cancelled job settled without running; every other job ran exactly once.
    assert sorted(r["job_id"] for r in runs.starts()) == ["fails", "ok", "running-first", "unknown"]
    assert not Worker.objects.exists(), "the worker deregisters on exit"
    assert "watchdog worker" in worker.output() and "t-record" in worker.output()


def test_lane_include_and_exclude(spawn_worker, runs):
    wd.enqueue("r1", queue="q1", lane="t-record")
    wd.enqueue("o1", queue="q2", lane="t-other")

    only_other = spawn_worker("--burst", "--lane", "t-other")
    assert only_other.wait() == 0, only_other.output()
    assert wd.get_job("o1").outcome == "completed"
    assert wd.get_job("r1").state == "queued"

    wd.enqueue("o2", queue="q3", lane="t-other")
    not_other = spawn_worker("--burst", "--exclude-lane", "t-other")
    assert not_other.wait() == 0, not_other.output()
    assert wd.get_job("r1").outcome == "completed"
    assert wd.get_job("o2").state == "queued"
    assert [r["job_id"] for r in runs.starts()] == ["o1", "r1"]


def test_unknown_lane_is_rejected_with_a_clear_error(spawn_worker):
    worker = spawn_worker("--burst", "--lane", "no-such-lane")
    assert worker.wait() != 0
    assert "no handler serves the requested lanes" in worker.output()


@pytest.mark.parametrize(
    ("option", "value"), [("--concurrency", "0"), ("--batch", "0"), ("--batch", "501")]
)
def test_bad_arguments_exit_non_zero(spawn_worker, option, value):
    worker = spawn_worker("--burst", option, value)
    assert worker.wait() != 0
    assert option in worker.output()
    assert not Job.objects.filter(state="running").exists()
