"""Forgetting idle task queues: only rows no job names go, and an enqueue racing the
cleanup loses nothing (its job stays in a queue that exists, and is claimed)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, transaction

import django_watchdog as wd
from django_watchdog.models import Job, Queue
from django_watchdog.store.store import Partition, Store
from django_watchdog.store.worker_store import WorkerStore

from .helpers import in_background

pytestmark = pytest.mark.django_db(transaction=True)


def idle_queue(name: str) -> None:
    """A queue whose jobs retention has pruned: its row, and no job."""
    wd.enqueue(f"gone-{name}", queue=name, lane="task:x")
    Job.objects.filter(queue=name).delete()


def queue_names() -> set[str]:
    return set(Queue.objects.values_list("name", flat=True))


def test_only_task_queues_that_no_job_names_are_forgotten() -> None:
    for name in ("task:idle", "task-key:t:idle", "report-7", "Task:native", "task:delayed"):
        idle_queue(name)
    wd.enqueue("queued", queue="task:queued", lane="task:x")
    wd.enqueue("running", queue="task:running", lane="task:x")
    assert Store().claim(Partition(lanes=["task:x"])).job.job_id in {"queued", "running"}
    wd.enqueue("settled", queue="task:settled", lane="task:y")
    claimed = Store().claim(Partition(lanes=["task:y"]))
    from django_watchdog.domain.values import Decision

    Store().settle("settled", claimed.claim_token, Decision.completed())
    from datetime import timedelta

    from django.utils import timezone

    wd.enqueue(
        "later", queue="task:delayed", lane="task:x", run_after=timezone.now() + timedelta(hours=1)
    )
    assert Store("default").forget_idle_task_queues() == 2
    assert queue_names() == {
        "report-7",
        "Task:native",
        "task:queued",
        "task:running",
        "task:settled",
        "task:delayed",
    }
    assert Store("default").forget_idle_task_queues() == 0


def test_a_forgotten_queue_is_created_again_by_the_next_enqueue() -> None:
    idle_queue("task:again")
    assert Store("default").forget_idle_task_queues() == 1
    wd.enqueue("back", queue="task:again", lane="task:x")
    assert "task:again" in queue_names()
    assert Store().claim(Partition(lanes=["task:x"])).job.job_id == "back"


@pytest.mark.concurrent_writers
def test_an_enqueue_racing_the_cleanup_keeps_its_queue_row_and_is_claimed() -> None:
    """The enqueue holds the idle queue's row (uncommitted job) while the cleanup runs:
    the cleanup must not delete the row the job needs (a claim joins it). It skips a row
    another transaction holds, so it finishes while the enqueue is still open."""
    queue = "task:raced"
    idle_queue(queue)
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()
    errors: list[BaseException] = []
    forgotten: list[int] = []

    def enqueue() -> None:
        with transaction.atomic():
            wd.enqueue("raced", queue=queue, lane="task:x")
            entered.set()
            assert release.wait(30), "the test never released the enqueue"

    def cleanup() -> None:
        assert entered.wait(30)
        forgotten.append(Store("default").forget_idle_task_queues())
        finished.set()

    threads = [in_background(enqueue, errors), in_background(cleanup, errors)]
    try:
        assert finished.wait(30) or errors, "the cleanup waited for the enqueue's queue row"
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not errors, errors
    assert forgotten == [0]
    assert queue in queue_names()
    assert Store().claim(Partition(lanes=["task:x"])).job.job_id == "raced"


def test_cleanup_concurrent_with_enqueues_loses_no_job() -> None:
    """Many rounds of enqueues into idle queues beside cleanups: every job keeps its queue
    row and is claimed."""
    names = [f"task:churn-{n}" for n in range(20)]
    for name in names:
        idle_queue(name)
    errors: list[BaseException] = []
    done = threading.Event()

    def cleaner() -> None:
        try:
            while not done.is_set():
                Store("default").forget_idle_task_queues()
        finally:
            connection.close()

    thread = in_background(cleaner, errors)
    try:
        for round_ in range(5):
            for name in names:
                wd.enqueue(f"{name}-{round_}", queue=name, lane="task:x")
            claimed = 0
            while (result := Store().claim(Partition(lanes=["task:x"]))).status == "claimed":
                Job.objects.filter(job_id=result.job.job_id).delete()  # pruned at once
                claimed += 1
            assert claimed == len(names), f"round {round_}: {claimed} of {len(names)} claimed"
    finally:
        done.set()
        thread.join(timeout=30)
    assert not errors, errors


def test_the_workers_retention_pass_forgets_idle_task_queues() -> None:
    from datetime import timedelta

    from django_watchdog.engine.clock import SystemClock
    from django_watchdog.engine.housekeeping import Housekeeping

    idle_queue("task:pruned-long-ago")
    Housekeeping(WorkerStore("default"), SystemClock(), schedules={}).prune(timedelta(days=1))
    assert "task:pruned-long-ago" not in queue_names()
