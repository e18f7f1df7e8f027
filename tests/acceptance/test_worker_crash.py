"""kill -9, SIGSTOP and SIGTERM against real worker processes (SPEC §4.8, §6)."""

import signal

import pytest

import django_watchdog as wd
from django_watchdog.models import Job, Worker

from .conftest import wait_until

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def _killed_mid_job(spawn_worker, runs, job_id, **enqueue):
    wd.enqueue(
        job_id,
        queue="crashy",
        lane="t-record",
        payload={"first_sleep": 60, "result": "run {run}"},
        **enqueue,
    )
    victim = spawn_worker()
    wait_until(lambda: runs.starts(job_id), message="the job to start")
    victim.signal(signal.SIGKILL)
    victim.wait()
    assert wd.get_job(job_id).state == "running"


def test_kill_9_mid_job_is_requeued_and_completed_within_budget(spawn_worker, runs):
    _killed_mid_job(spawn_worker, runs, "j", max_recoveries=1)
    rescuer = spawn_worker("--burst")
    assert rescuer.wait() == 0, rescuer.output()
    job = wd.get_job("j")
    assert (job.state, job.outcome, job.recovery_count, job.result) == (
        "settled",
        "completed",
        1,
        "run 2",
    )
    assert [r["recovery_count"] for r in runs.starts("j")] == [0, 1]


def test_kill_9_without_a_recovery_policy_is_interrupted(spawn_worker, runs):
    _killed_mid_job(spawn_worker, runs, "j")
    rescuer = spawn_worker("--burst")
    assert rescuer.wait() == 0, rescuer.output()
    job = wd.get_job("j")
    assert (job.outcome, job.failure_reason) == (
        "interrupted",
        "Execution disappeared without a recovery policy",
    )
    assert len(runs.starts("j")) == 1


def test_kill_9_with_a_spent_budget_is_interrupted(spawn_worker, runs):
    _killed_mid_job(spawn_worker, runs, "j", max_recoveries=0)
    rescuer = spawn_worker("--burst")
    assert rescuer.wait() == 0, rescuer.output()
    job = wd.get_job("j")
    assert (job.outcome, job.failure_reason, job.recovery_count) == (
        "interrupted",
        "Restart recovery budget exhausted (0 recoveries)",
        0,
    )


def test_a_stopped_worker_is_fenced_out_when_it_resumes(spawn_worker, runs):
    wd.enqueue(
        "j",
        queue="q",
        lane="t-record",
        max_recoveries=1,
        payload={"first_sleep": 2.0, "result": "run {run}"},
    )
    zombie = spawn_worker()
    wait_until(lambda: runs.starts("j"), message="the first run to start")
    zombie.signal(signal.SIGSTOP)
    try:
        rescuer = spawn_worker()
        # WORKER_TIMEOUT is 3 s in the test settings; the rescuer recovers and re-runs it.
        wait_until(
            lambda: wd.get_job("j").state == "settled",
            timeout=30,
            message="the second run to settle",
        )
    finally:
        zombie.signal(signal.SIGCONT)
    wait_until(
        lambda: "settle_conflict" in zombie.output(),
        timeout=30,
        message="the zombie's late settle to be refused",
    )
    job = wd.get_job("j")
    assert (job.outcome, job.result, job.recovery_count) == ("completed", "run 2", 1)
    assert [r["recovery_count"] for r in runs.starts("j")] == [0, 1]
    for worker in (zombie, rescuer):
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()


def test_sigterm_lets_the_running_job_finish_then_exits_zero(spawn_worker, runs):
    wd.enqueue("j", queue="q", lane="t-record", payload={"sleep": 1.0, "result": "done"})
    worker = spawn_worker()
    wait_until(lambda: runs.starts("j"), message="the job to start")
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    job = wd.get_job("j")
    assert (job.outcome, job.result) == ("completed", "done")
    assert not Worker.objects.exists()


def test_sigterm_stops_an_idle_worker_at_once_whatever_its_poll_interval(spawn_worker, runs):
    """On PostgreSQL nothing else wakes the idle main loop before its 60 s poll (on SQLite
    the heartbeat's commits do, every 2 s)."""
    wd.enqueue("j", queue="q", lane="t-record")
    worker = spawn_worker("--poll-interval", "60")
    wait_until(lambda: "event=settle job_id=j " in worker.output(), message="the job to settle")
    worker.signal(signal.SIGTERM)  # the main loop sleeps for up to 60 s now
    assert worker.wait(timeout=30) == 0, worker.output()  # at once: well before the poll
    assert "SIGTERM: finishing running jobs" in worker.output()
    assert not Worker.objects.exists()


def test_cancelling_a_running_job_stops_it_cooperatively(spawn_worker, runs):
    wd.enqueue("j", queue="q", lane="t-cancel")
    worker = spawn_worker()
    wait_until(lambda: runs.starts("j"), message="the job to start")
    assert wd.cancel("j").status == "recorded"
    wait_until(lambda: wd.get_job("j").state == "settled", message="the job to settle")
    assert wd.get_job("j").outcome == "cancelled"
    assert runs.ends("j")[0]["cancel_requested"] is True
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0
    assert Job.objects.filter(state="running").count() == 0


def test_a_second_signal_exits_at_once(spawn_worker, runs):
    wd.enqueue("stuck", queue="q", lane="t-hang", payload={"sleep": 60})
    worker = spawn_worker("--shutdown-grace", "60")
    wait_until(lambda: runs.starts("stuck"), message="the job to start")
    worker.signal(signal.SIGTERM)
    wait_until(lambda: "finishing running jobs" in worker.output(), message="the first signal")
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=30) == 128 + signal.SIGTERM  # well within the 60 s grace
    assert "second signal" in worker.output()
    # The job is left running under a worker that is gone: the next worker recovers it.
    assert wd.get_job("stuck").state == "running"
