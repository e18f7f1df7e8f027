"""The task framework's names the tests use: ``django.tasks`` (Django 6) or the backport."""

from django_watchdog.tasks.framework import (  # noqa: F401 - re-exported for the tests
    NAME,
    NATIVE,
    InvalidTask,
    TaskContext,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task,
    task_backends,
    task_finished,
    task_started,
)

if NATIVE:
    from django.tasks import default_task_backend
    from django.tasks.checks import check_tasks
    from django.tasks.exceptions import TaskResultMismatch
else:  # Django 5.2: the django-tasks backport
    from django_tasks import default_task_backend
    from django_tasks.checks import check_tasks
    from django_tasks.exceptions import TaskResultMismatch

DUMMY_BACKEND = f"{NAME}.backends.dummy.DummyBackend"

__all__ = ["DUMMY_BACKEND", "TaskResultMismatch", "check_tasks", "default_task_backend"]
