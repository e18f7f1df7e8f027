"""Rows edited by hand with raw SQL under a running worker: the worker quarantines or skips
what it cannot read or claim, and goes on claiming; reads, ``fail_lane`` and the admin
still answer."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import django_watchdog as wd
from django_watchdog import WatchdogError
from django_watchdog.models import Job, Worker
from tests.acceptance.conftest import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

servers_only = pytest.mark.skipif(
    "connection.vendor == 'sqlite'",
    reason="SQLite keeps timestamps as text: no instant Python cannot hold",
)
#: A timestamp each server stores and Python cannot hold: PostgreSQL's year 10000, MariaDB's
#: year 0 (its DATETIME refuses year 10000; mysqlclient reads year 0 as NULL).
UNREADABLE = {
    "postgresql": "'10000-01-01 00:00:00+00'::timestamptz",
    "mysql": "'0000-01-01 00:00:00'",
}


def _sql(statement: str, params: list[object]) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def _unreadable(job_id: str, column: str) -> None:
    value = UNREADABLE[connection.vendor]
    _sql(f"UPDATE watchdog_job SET {column} = {value} WHERE job_id = %s", [job_id])  # noqa: S608


def _settled(job_id: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT state FROM watchdog_job WHERE job_id = %s", [job_id])
        return cursor.fetchone()[0] == "settled"


@pytest.fixture
def admin() -> Iterator[Client]:
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(user)
    yield client


def _reads_answer(admin: Client, good: str) -> None:
    job = wd.get_job(good)
    assert job is not None and job.outcome == "completed"
    assert good in [record.job.job_id for record in wd.settled_jobs()]
    page = admin.get(reverse("admin:django_watchdog_job_changelist"))
    assert page.status_code == 200 and good.encode() in page.content


@servers_only
def test_a_timestamp_python_cannot_hold_is_quarantined_and_the_worker_goes_on(
    spawn_worker, runs, admin
):
    worker = spawn_worker("--concurrency", "2")
    wait_until(Worker.objects.exists, message="the worker to register")
    with transaction.atomic():
        wd.enqueue("bad", queue="q-bad", lane="t-record", priority=9)
        wd.enqueue(
            "later", queue="q-later", lane="t-record", run_after=timezone.now() + timedelta(days=1)
        )
        _unreadable("bad", "enqueued_at")
        if connection.vendor == "postgresql":  # MariaDB's year 0 is long due: no poison
            _unreadable("later", "run_after")  # as enqueue(run_after=datetime.max west) did
    wd.enqueue("good", queue="q-good", lane="t-record")

    wait_until(lambda: runs.ends("good"), message="the worker to run the good job")
    wait_until(lambda: _settled("bad"), message="the bad row to be quarantined")
    wait_until(lambda: wd.get_job("good").state == "settled", message="the good job to settle")
    assert not runs.starts("bad"), "a row that does not decode never runs"
    with pytest.raises(WatchdogError) as caught:
        wd.get_job("bad")
    assert caught.value.kind == "store_unavailable"
    quarantined = {r.job.job_id: r.job for r in wd.settled_jobs()}["bad"]
    assert quarantined.outcome == "failed"
    assert quarantined.failure_reason.startswith("Job row does not decode: ")
    assert "out of range" in quarantined.failure_reason
    _reads_answer(admin, "good")

    failure = wd.fail_lane("t-record", "retire the lane")
    assert [job.job_id for job in failure.jobs] == ["later"]
    wd.enqueue("after", queue="q-after", lane="t-record")
    wait_until(lambda: runs.ends("after"), message="the worker to go on claiming")
    assert worker.popen.poll() is None, worker.output()
    assert "step_failed" not in worker.output()


@servers_only
def test_a_running_job_edited_to_a_timestamp_python_cannot_hold_is_still_recovered(
    spawn_worker, runs
):
    lost = spawn_worker("--concurrency", "1")
    wd.enqueue("lost", queue="q", lane="t-record", payload={"sleep": 60})
    wait_until(lambda: runs.starts("lost"), message="the first worker to start the job")
    lost.popen.kill()
    lost.popen.wait()
    _unreadable("lost", "started_at")

    survivor = spawn_worker("--concurrency", "1")
    wait_until(lambda: _settled("lost"), timeout=60, message="recovery to settle the lost job")
    with connection.cursor() as cursor:
        cursor.execute("SELECT outcome FROM watchdog_job WHERE job_id = 'lost'")
        assert cursor.fetchone()[0] == "interrupted"
    wd.enqueue("next", queue="q2", lane="t-record")
    wait_until(lambda: runs.ends("next"), message="the survivor to go on claiming")
    assert survivor.popen.poll() is None, survivor.output()


@pytest.mark.parametrize("batch", ["1", "5"])
def test_two_ready_jobs_in_one_queue_are_run_one_after_the_other(spawn_worker, runs, batch):
    """A hand edit marks a second job of a queue ready; the worker skips it until the
    queue's running job settles, and stops for nothing."""
    with transaction.atomic():
        wd.enqueue("a1", queue="a", lane="t-record", priority=5, payload={"sleep": 0.3})
        wd.enqueue("a2", queue="a", lane="t-record")
        Job.objects.filter(job_id="a2").update(ready=True)
    for n in range(4):
        wd.enqueue(f"b{n}", queue=f"b{n}", lane="t-record")
    worker = spawn_worker("--burst", "--concurrency", "2", "--batch", batch)
    assert worker.wait(timeout=60) == 0, worker.output()
    assert sorted(r["job_id"] for r in runs.ends()) == ["a1", "a2", "b0", "b1", "b2", "b3"]
    (a1_end,) = [r["time"] for r in runs.ends("a1")]
    (a2_start,) = [r["time"] for r in runs.starts("a2")]
    assert a2_start >= a1_end, "the queue stayed serial"
    assert set(Job.objects.values_list("outcome", flat=True)) == {"completed"}


@pytest.mark.skipif(
    "connection.vendor != 'sqlite'",
    reason="a server's varchar(256) refuses the edit itself (PostgreSQL, MariaDB in strict mode)",
)
def test_a_row_that_does_not_decode_is_quarantined_under_a_running_worker(
    spawn_worker, runs, admin
):
    """A queue name past 256 characters makes the row undecodable: quarantined at claim
    time, read by the feed and the admin (the servers' twin is the timestamp test)."""
    worker = spawn_worker("--concurrency", "1")
    wait_until(Worker.objects.exists, message="the worker to register")
    with transaction.atomic():
        wd.enqueue("bad", queue="q-bad", lane="t-record")
        Job.objects.filter(job_id="bad").update(queue="q" * 257)
    wd.enqueue("good", queue="q-good", lane="t-record")
    wait_until(lambda: runs.ends("good"), message="the worker to run the good job")
    wait_until(lambda: _settled("bad"), message="the bad row to be quarantined")
    wait_until(lambda: wd.get_job("good").state == "settled", message="the good job to settle")
    assert not runs.starts("bad")
    quarantined = {r.job.job_id: r.job for r in wd.settled_jobs()}["bad"]
    assert quarantined.failure_reason.startswith("Job row does not decode: ")
    _reads_answer(admin, "good")
    assert worker.popen.poll() is None, worker.output()
