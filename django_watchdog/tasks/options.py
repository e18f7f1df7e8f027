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
from django.db import connections
from django.utils.module_loading import import_string

from ..domain import validation
from ..domain.errors import InvalidInput
from .keys import KeyFunction
from .locks import LockFunction

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


def key_function(path: str) -> KeyFunction:
    """The key function at dotted ``path``; ``ImportError`` if none."""
    function: KeyFunction = _function_at(path)
    return function


def lock_function(path: str) -> LockFunction:
    """The lock function at dotted ``path``; ``ImportError`` if none."""
    function: LockFunction = _function_at(path)
    return function


def row_locks(options: Mapping[str, Any]) -> dict[str, str]:
    value = options.get("ROW_LOCKS") or {}
    return dict(value) if isinstance(value, Mapping) else {}


def serial_keys(options: Mapping[str, Any]) -> dict[str, str]:
    value = options.get("SERIAL_KEYS") or {}
    return dict(value) if isinstance(value, Mapping) else {}


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
    messages.extend(_check_row_locks(where, options))
    cap = options.get("MAX_PAYLOAD_BYTES")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap <= 0):
        messages.append(
            checks.Error(
                f"{where}['OPTIONS']['MAX_PAYLOAD_BYTES'] must be a positive int (or None).",
                id="django_watchdog.E110",
            )
        )
    return messages


def _check_functions(
    name: str, value: object, *, kind: str, returns: str, example: str, id: str
) -> tuple[dict[str, Any], list[checks.CheckMessage]]:
    """Check a ``task path → dotted path of a function`` option; return it (``{}`` if not
    a dict) and its problems."""
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
                    f"as {example!r}.",
                    id=id,
                )
            )
    return value, messages


def _check_row_locks(where: str, options: dict[str, Any]) -> list[checks.CheckMessage]:
    return _check_functions(
        f"{where}['OPTIONS']['ROW_LOCKS']",
        options.get("ROW_LOCKS", {}),
        kind="lock",
        returns="QuerySet | None",
        example="django_watchdog.tasks.locks.model_object",
        id="django_watchdog.E111",
    )[1]


def _check_serial_keys(where: str, options: dict[str, Any]) -> list[checks.CheckMessage]:
    keys, messages = _check_functions(
        f"{where}['OPTIONS']['SERIAL_KEYS']",
        options.get("SERIAL_KEYS", {}),
        kind="key",
        returns="str | None",
        example="django_watchdog.tasks.keys.model_object",
        id="django_watchdog.E108",
    )
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
