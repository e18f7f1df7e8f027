"""The task lane handler, driven through the store: claim, run the handler, settle."""

import pytest
from django.test import override_settings
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.backend import enqueue_task
from django_watchdog.store.store import Partition, Store
from django_watchdog.tasks import errors
from django_watchdog.tasks.mapping import PAYLOAD_KIND, UNKNOWN_WORKER, raised_class_path
from tests.tasks_app import drive, tasks
from tests.tasks_app.framework import (
    TaskResultStatus,
    default_task_backend,
    task_finished,
    task_started,
)

pytestmark = pytest.mark.django_db


def test_successful_task():
    result = tasks.add.enqueue(2, b=3)
    job = drive.run_next()

    assert job.outcome == "completed" and job.result == 5
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.is_finished
    assert result.errors == []
    assert result.worker_ids == [drive.WORKER] and result.attempts == 1
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at == result.started_at


def test_running_task_shows_running():
    result = tasks.add.enqueue(1, 1)
    drive.claim()
    result.refresh()
    assert result.status == TaskResultStatus.RUNNING
    assert result.started_at is not None and result.finished_at is None
    assert result.worker_ids == [drive.WORKER]
    with pytest.raises(ValueError, match="Task has not finished yet"):
        result.return_value  # noqa: B018


def test_return_value_is_normalised_to_json():
    result = tasks.returns_tuple.enqueue()
    drive.run_next()
    assert default_task_backend.get_result(result.id).return_value == [1, 2]


def test_unserialisable_return_value_fails_as_in_django():
    result = tasks.returns_object.enqueue()
    drive.run_next()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is TypeError


def test_async_task_runs_in_the_handler():
    result = tasks.add_async.enqueue(20, 22)
    drive.run_next()
    assert tasks.add_async.get_result(result.id).return_value == 42


def test_failing_task_reports_class_and_traceback():
    result = tasks.failing.enqueue("no stock")
    job = drive.run_next()

    assert job.outcome == "failed"
    assert job.failure_reason == "TaskBoom: no stock"
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        result.return_value  # noqa: B018
    [error] = result.errors
    assert error.exception_class_path == "tests.tasks_app.tasks.TaskBoom"
    assert error.exception_class is tasks.TaskBoom
    assert "Traceback" in error.traceback and "no stock" in error.traceback
    assert result.finished_at is not None


def test_builtin_exception_class_path():
    text = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad\n'
    assert raised_class_path(text, "ValueError: bad") == "builtins.ValueError"
    noted = text + "a note printed after the exception\n"
    assert raised_class_path(noted, "ValueError: bad") == "builtins.ValueError"
    assert raised_class_path("garbage", "ValueError: bad") is None


def test_outcome_unknown_is_failed_with_outcome_unknown():
    result = tasks.unknown_effect.enqueue()
    assert drive.run_next().outcome == "outcome_unknown"
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is wd.OutcomeUnknown
    assert "may or may not have happened" in result.errors[0].traceback
    assert "mail server timed out" in result.errors[0].traceback


def test_cancelled_before_running_is_failed_with_cancelled():
    result = tasks.noop.enqueue()
    assert wd.cancel(result.id).status == "recorded"
    assert Store().claim(Partition(lanes=["task:tasks"])).status == "cancelled"
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is errors.TaskCancelled
    assert "cancelled" in result.errors[0].traceback
    assert result.worker_ids == [] and result.started_at is None


def test_cancelled_while_running_context_sees_it():
    result = tasks.context_info.enqueue()
    job, token = drive.claim()
    wd.cancel(result.id)
    settled = drive.run(job, token, cancel_requested=True)

    assert settled.outcome == "cancelled"
    assert settled.result["cancel_requested"] is True
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is errors.TaskCancelled


def test_context_carries_attempt_and_result():
    result = tasks.context_info.enqueue()
    job = drive.run_next()
    assert job.result == {
        "id": result.id,
        "attempt": 1,
        "status": "RUNNING",
        "worker_ids": [drive.WORKER],
        "cancel_requested": False,
    }


def test_interrupted_task_is_failed_with_interrupted():
    result = tasks.noop.enqueue()
    job, token = drive.claim()
    assert Store().reconcile(job.job_id, token).status == "settled"
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is errors.TaskInterrupted
    assert "without a recovery policy" in result.errors[0].traceback
    assert result.worker_ids == [drive.WORKER]


def test_failed_lane_is_failed_without_traceback():
    result = tasks.noop.enqueue()
    wd.fail_lane("task:tasks", "lane retired")
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class is errors.TaskFailed
    assert "lane retired" in result.errors[0].traceback


@override_settings(
    TASKS={
        "default": {
            "BACKEND": "django_watchdog.backend.WatchdogBackend",
            "QUEUES": ["tasks", "tasks-bulk"],
            "OPTIONS": {"MAX_RECOVERIES": 1},
        }
    }
)
def test_recovered_task_counts_attempts():
    result = tasks.context_info.enqueue()
    job, token = drive.claim(worker_id="w-lost")
    assert Store().reconcile(job.job_id, token).status == "requeued"

    result.refresh()
    assert result.status == TaskResultStatus.READY
    assert result.worker_ids == [UNKNOWN_WORKER] and result.attempts == 1

    job = drive.run_next()
    assert job.result["attempt"] == 2
    assert job.result["worker_ids"] == [UNKNOWN_WORKER, drive.WORKER]
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.attempts == 2


def test_signals_are_sent_while_running():
    seen = []

    def started(sender, task_result, **kwargs):
        seen.append(("started", task_result.status, sender.__name__))

    def finished(sender, task_result, **kwargs):
        seen.append(("finished", task_result.status, task_result.return_value))

    task_started.connect(started)
    task_finished.connect(finished)
    try:
        tasks.add.enqueue(1, 2)
        drive.run_next()
    finally:
        task_started.disconnect(started)
        task_finished.disconnect(finished)
    assert seen == [
        ("started", TaskResultStatus.RUNNING, "WatchdogBackend"),
        ("finished", TaskResultStatus.SUCCESSFUL, 3),
    ]


@pytest.mark.parametrize(
    ("module", "function"),
    [
        ("tests.tasks_app.tasks", "plain_function"),
        ("tests.tasks_app.tasks", "alias_of_add"),
        ("os", "system"),
        ("tests.tasks_app.no_such_module", "add"),
        ("tests.tasks_app.tasks", "add.func"),
        ("__import__('os')", "x"),
    ],
)
def test_handler_runs_only_registered_tasks(module, function):
    payload = {
        "kind": PAYLOAD_KIND,
        "backend": "default",
        "module": module,
        "function": function,
        "args": [],
        "kwargs": {},
    }
    wd.enqueue("forged", queue="forged", lane="task:tasks", payload=payload)
    job = drive.run_next()
    assert job.outcome == "failed"
    assert job.failure_reason.startswith("TaskNotRegistered:")


def test_handler_refuses_a_native_job_in_a_task_lane():
    wd.enqueue("native", queue="native", lane="task:tasks", payload={"not": "a task"})
    job = drive.run_next()
    assert job.outcome == "failed"
    assert "holds no django.tasks call" in job.failure_reason


def test_priorities_across_lanes_run_in_order():
    enqueue_task(tasks.bulk, (1,), queue="bulk")
    enqueue_task(tasks.bulk, (2,), queue="bulk")
    results = [drive.run_next("task:tasks-bulk").result for _ in range(2)]
    assert results == [1, 2]
    assert Store().claim(Partition(lanes=["task:tasks-bulk"])).status == "none"


def test_finished_at_is_the_settle_time():
    # The database stamps settlement; SQLite's clock counts whole milliseconds.
    now = timezone.now()
    before = now.replace(microsecond=now.microsecond // 1000 * 1000)
    result = tasks.noop.enqueue()
    drive.run_next()
    result.refresh()
    assert before <= result.finished_at <= timezone.now()
