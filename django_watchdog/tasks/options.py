"""``WatchdogBackend``'s ``OPTIONS``: read at each use (so ``override_settings`` reaches them)
and checked by ``manage.py check`` (ids ``django_watchdog.E105``–``E111``).

=====================  =================================================================
``DATABASE``           alias the jobs live in (default: the router's choice for ``Job``)
``MAX_RECOVERIES``     recovery policy of every task job (default ``None``)
``MAX_PAYLOAD_BYTES``  size cap of a task call's arguments as JSON (default: the
                       ``WATCHDOG["MAX_PAYLOAD_BYTES"]`` setting)
``SERIAL_KEYS``        task path → dotted path of a key function (``tasks.keys``): calls
                       with the same key share a serial queue, so they run one at a time,
                       in order
``COALESCE``           task paths (each with a serial key) whose call returns the result
                       of an identical call still queued instead of adding a job
``ROW_LOCKS``          task path → dotted path of a lock function (``tasks.locks``): a
                       call runs in one transaction that first locks the rows it names
=====================  =================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import connections
from django.utils.module_loading import import_string

from ..domain import validation
from ..domain.errors import InvalidInput

KNOWN_OPTIONS = frozenset(
    {"DATABASE", "MAX_RECOVERIES", "MAX_PAYLOAD_BYTES", "SERIAL_KEYS", "COALESCE", "ROW_LOCKS"}
)


@cache
def _function_at(path: str) -> Any:
    """The callable at dotted ``path`` (imported once); ``ImportError`` if none."""
    function = import_string(path)
    if not callable(function):
        raise ImportError(f"{path!r} is not callable")
    return function


def task_function(
    options: Mapping[str, Any], option: str, alias: str, task_path: str
) -> tuple[Any, str, str] | None:
    """The function ``OPTIONS[option]`` (``SERIAL_KEYS``, ``ROW_LOCKS``) names for the task
    at ``task_path``, with the option's name and the function's path for messages; ``None``
    if it names none. ``ImproperlyConfigured`` if it does not import."""
    value = options.get(option) or {}
    path = value.get(task_path) if isinstance(value, Mapping) else None
    if path is None:
        return None
    name = f"TASKS[{alias!r}]['OPTIONS'][{option!r}][{task_path!r}]"
    try:
        return _function_at(path), name, path
    except ImportError as error:
        raise ImproperlyConfigured(f"{name} = {path!r}: {error}") from error


def coalesced(options: Mapping[str, Any]) -> frozenset[str]:
    value = options.get("COALESCE") or ()
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        return frozenset()
    return frozenset(path for path in value if isinstance(path, str))


def check(where: str, options: object) -> list[checks.CheckMessage]:
    """Every problem in a backend's ``OPTIONS``; ``where`` names the backend."""
    if not isinstance(options, dict):
        return [checks.Error(f"{where}['OPTIONS'] must be a dict.", id="django_watchdog.E105")]
    messages: list[checks.CheckMessage] = []
    for name in sorted(set(options) - KNOWN_OPTIONS, key=str):
        messages.append(
            checks.Error(
                f"{where}['OPTIONS'][{name!r}] is not a WatchdogBackend option.",
                hint=f"Known options: {', '.join(sorted(KNOWN_OPTIONS))}.",
                id="django_watchdog.E105",
            )
        )
    database = options.get("DATABASE")
    if database is not None and database not in connections:
        messages.append(
            checks.Error(
                f"{where}['OPTIONS']['DATABASE'] = {database!r} is not in DATABASES.",
                id="django_watchdog.E106",
            )
        )
    try:
        validation.max_recoveries(options.get("MAX_RECOVERIES"))
    except InvalidInput as error:
        messages.append(
            checks.Error(
                f"{where}['OPTIONS']['MAX_RECOVERIES']: {error.problem} (or None).",
                id="django_watchdog.E107",
            )
        )
    messages.extend(_check_serial_keys(where, options))
    messages.extend(_check_functions(where, options, "ROW_LOCKS")[1])
    cap = options.get("MAX_PAYLOAD_BYTES")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap <= 0):
        messages.append(
            checks.Error(
                f"{where}['OPTIONS']['MAX_PAYLOAD_BYTES'] must be a positive int (or None).",
                id="django_watchdog.E110",
            )
        )
    return messages


#: Options that map a task path to a function: what the function is, what it returns, an
#: example, the id of the check that reports a bad one.
FUNCTION_OPTIONS = {
    "SERIAL_KEYS": ("key", "str | None", "keys.model_object", "django_watchdog.E108"),
    "ROW_LOCKS": ("lock", "QuerySet | None", "locks.model_object", "django_watchdog.E111"),
}


def _check_functions(
    where: str, options: dict[str, Any], option: str
) -> tuple[dict[str, Any], list[checks.CheckMessage]]:
    """Check the ``task path → dotted path of a function`` option ``option``; return it
    (``{}`` if not a dict) and its problems."""
    kind, returns, example, id = FUNCTION_OPTIONS[option]
    name = f"{where}['OPTIONS'][{option!r}]"
    value = options.get(option, {})
    if not isinstance(value, dict):
        message = f"{name} must be a dict: task path → {kind} function path."
        return {}, [checks.Error(message, id=id)]
    messages: list[checks.CheckMessage] = []
    for task_path, path in sorted(value.items(), key=str):
        try:
            if not isinstance(task_path, str) or not isinstance(path, str):
                raise ImportError(f"task path and {kind} function path must be str")
            _function_at(path)
        except ImportError as error:
            messages.append(
                checks.Error(
                    f"{name}[{task_path!r}] = {path!r}: {error}.",
                    hint=f"A dotted path to a function (args, kwargs) -> {returns}, such "
                    f"as 'django_watchdog.tasks.{example}'.",
                    id=id,
                )
            )
    return value, messages


def _check_serial_keys(where: str, options: dict[str, Any]) -> list[checks.CheckMessage]:
    keys, messages = _check_functions(where, options, "SERIAL_KEYS")
    value = options.get("COALESCE", [])
    name = f"{where}['OPTIONS']['COALESCE']"
    if isinstance(value, str) or not isinstance(value, list | tuple):
        return [
            *messages,
            checks.Error(f"{name} must be a list of task paths.", id="django_watchdog.E109"),
        ]
    for task_path in value:
        if task_path not in keys:
            messages.append(
                checks.Error(
                    f"{name} names {task_path!r}, which has no serial key.",
                    hint="A call is coalesced with an identical one queued under its serial "
                    "key: add the task to SERIAL_KEYS.",
                    id="django_watchdog.E109",
                )
            )
    return messages
