"""Register the task runner as the handler of every lane a ``WatchdogBackend`` serves.

Called from ``AppConfig.ready()`` (after ``<app>/jobs.py`` autodiscovery) so a worker process
knows the task lanes before any task module is imported. Safe on Django versions without
a task framework (neither ``django.tasks`` nor the ``django_tasks`` backport): it then
finds no backend and does nothing.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from .. import handlers
from ..domain.errors import InvalidInput

DEFAULT_QUEUES = ["default"]


def backend_lanes() -> dict[str, list[Any]]:
    """``TASKS`` alias → its ``QUEUES`` (task queue names, not lanes), for the aliases whose
    backend is a WatchdogBackend."""
    configured = getattr(settings, "TASKS", None)
    if not isinstance(configured, dict):
        return {}
    found: dict[str, list[Any]] = {}
    for alias, params in configured.items():
        if not isinstance(params, dict) or not _is_watchdog_backend(params.get("BACKEND")):
            continue
        found[alias] = list(params.get("QUEUES", DEFAULT_QUEUES))
    return found


def _is_watchdog_backend(path: object) -> bool:
    if not isinstance(path, str):
        return False
    try:
        backend_class = import_string(path)
        from .backend import WatchdogBackend
    except ImportError:
        return False  # Django reports a missing backend; no framework means none of ours.
    return isinstance(backend_class, type) and issubclass(backend_class, WatchdogBackend)


def register_lane(queue_name: object) -> bool:
    """Make the task runner the handler of ``queue_name``'s lane (``task:<queue_name>``);
    False if the lane is invalid or taken."""
    from .mapping import lane_of
    from .runner import install_log_filter, run_task

    try:
        name = lane_of(queue_name)
    except InvalidInput:
        return False  # reported by the backend's system check
    existing = handlers.registered().get(name)
    if existing is not None and existing is not run_task:
        return False  # another handler owns the lane: reported by the system check
    handlers.handler(name)(run_task)
    install_log_filter()
    return True


def register_lane_handlers() -> None:
    """Register the runner for the lanes of every configured WatchdogBackend."""
    for queue_names in backend_lanes().values():
        for name in queue_names:
            register_lane(name)
