"""The ``django.tasks`` backend, for ``TASKS``: ``django_watchdog.backend.WatchdogBackend``."""

from .tasks.backend import WatchdogBackend, aenqueue_task, enqueue_task

__all__ = ["WatchdogBackend", "aenqueue_task", "enqueue_task"]
