"""The task framework the backend is built on: Django's ``django.tasks`` or the backport.

Django 6 ships ``django.tasks``; on Django 5.2 the ``django-tasks`` package (imported as
``django_tasks``) is the same API under other names. Every module of the backend imports
the framework's names from here, so one implementation serves both. When both are
installed (Django 6 with an app, such as Wagtail 8, that imports ``task`` from the
backport), ``django.tasks`` is the framework: the backport's ``@task`` builds its tasks
with the backend's ``task_class``, which is then ``django.tasks.Task``, and their results,
signals and exceptions are ``django.tasks``'s.

``NAME`` is the framework's import name (and its logger's name); ``AVAILABLE`` is False
when neither is installed (importing this module then fails, so only ``registration``,
which checks ``AVAILABLE`` first, may import it on such a Django).
"""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING, Any


def _native() -> bool:
    try:
        return importlib.util.find_spec("django.tasks") is not None
    except ImportError:  # pragma: no cover - no django at all
        return False


def _backport() -> bool:
    return importlib.util.find_spec("django_tasks") is not None


NATIVE = _native()
AVAILABLE = NATIVE or _backport()

if TYPE_CHECKING or NATIVE:
    from django.tasks import (
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        task,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, TaskError
    from django.tasks.exceptions import (
        InvalidTask,
        InvalidTaskBackend,
        TaskResultDoesNotExist,
    )
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    NAME = "django.tasks"
else:  # pragma: no cover - Django 5.2: the django-tasks backport
    from django_tasks import task_backends
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import (
        TASK_MAX_PRIORITY,
        TASK_MIN_PRIORITY,
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
        task,
    )
    from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    NAME = "django_tasks"


def backport_backends() -> Any | None:
    """The backport's own backend handler when it is installed beside ``django.tasks``."""
    if not NATIVE or not _backport():
        return None
    return importlib.import_module("django_tasks").task_backends


__all__ = [
    "AVAILABLE",
    "NAME",
    "NATIVE",
    "backport_backends",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "InvalidTask",
    "InvalidTaskBackend",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
