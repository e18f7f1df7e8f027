"""End to end: a real ``watchdog_worker --burst`` process runs ``@task`` functions."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from django_watchdog.backend import enqueue_task
from tests.tasks_app import tasks
from tests.tasks_app.framework import TaskResultStatus

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def run_worker_burst(*args: str, settings: str = "tests.settings") -> subprocess.CompletedProcess:
    environment = os.environ.copy()
    environment.update(
        DJANGO_SETTINGS_MODULE=settings,
        WATCHDOG_DB_NAME=str(connection.settings_dict["NAME"]),
        PYTHONUNBUFFERED="1",
    )
    connection.close()  # SQLite: let the worker take the write lock at once
    return subprocess.run(
        [sys.executable, "-m", "django", "watchdog_worker", "--burst", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_worker_runs_django_tasks_and_results_report_them():
    added = tasks.add.enqueue(2, b=3)
    failed = tasks.failing.enqueue("out of paper")
    context = tasks.context_info.enqueue()
    coroutine = tasks.add_async.enqueue(40, 2)
    first = enqueue_task(tasks.echo, ("first",), queue="serial", job_id="serial-1")
    second = enqueue_task(tasks.echo, ("second",), queue="serial", job_id="serial-2")

    worker = run_worker_burst("--lane", "task:tasks", "--concurrency", "2", "--worker-id", "w-e2e")
    assert worker.returncode == 0, worker.stdout + worker.stderr

    added.refresh()
    assert added.status == TaskResultStatus.SUCCESSFUL
    assert added.return_value == 5
    assert added.worker_ids == ["w-e2e"]
    assert coroutine.task.get_result(coroutine.id).return_value == 42

    failed.refresh()
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[0].exception_class is tasks.TaskBoom
    assert "out of paper" in failed.errors[0].traceback

    info = tasks.context_info.get_result(context.id).return_value
    assert info["id"] == context.id and info["attempt"] == 1
    assert info["worker_ids"] == ["w-e2e"]

    first.refresh()
    second.refresh()
    assert first.return_value == {"args": ["first"], "kwargs": {}}
    assert second.return_value == {"args": ["second"], "kwargs": {}}
    assert first.finished_at <= second.started_at  # one queue: one after the other


@pytest.mark.parametrize("settings", ["tests.settings", "tests.root_logging_settings"])
def test_a_failed_tasks_traceback_is_logged_once(settings):
    """The worker's settle line carries it; the framework's own line
    (``Task id=... state=FAILED``) is still logged, without a second copy."""
    tasks.failing.enqueue("out of toner")
    worker = run_worker_burst("--lane", "task:tasks", settings=settings)
    assert worker.returncode == 0, worker.stdout + worker.stderr
    log = worker.stderr
    assert "event=settle" in log and "outcome=failed" in log, log
    assert log.count("Traceback (most recent call last)") == 1, log
    assert log.count("tasks.TaskBoom: out of toner") == 1, log  # the traceback's last line
