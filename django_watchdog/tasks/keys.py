"""Serial keys: which calls of a task share a serial queue, so they run one at a time, in order.

A key function takes a call's ``args`` (a list) and ``kwargs`` (a dict), as JSON types, and
returns a string (the calls that return the same string share a queue) or ``None`` (this
call runs in a queue of its own, in parallel with the others). The backend's
``OPTIONS["SERIAL_KEYS"]`` maps a task's dotted path to the dotted path of its key function;
the functions below cover the common cases.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from ..domain import validation

#: Prefix of the queue of a serial key: never a private queue (``task:<job_id>``).
KEY_QUEUE_PREFIX = "task-key:"

KeyFunction = Callable[[list[Any], dict[str, Any]], object]


def object_named(args: list[Any], kwargs: dict[str, Any]) -> tuple[str, str, Any] | None:
    """``(app_label, model_name, pk)`` of a call of that shape (positional or keyword),
    or ``None`` for another shape."""
    names = ("app_label", "model_name", "pk")
    values = [args[i] if i < len(args) else kwargs.get(name) for i, name in enumerate(names)]
    if any(value is None or isinstance(value, dict | list) for value in values):
        return None
    app_label, model_name, pk = values
    return str(app_label), str(model_name), pk


def model_object(args: list[Any], kwargs: dict[str, Any]) -> str | None:
    """``app_label.model_name:pk`` of a call ``(app_label, model_name, pk)``.

    The shape of Wagtail's object tasks (reference index, search index, image focal
    point): every update of one object shares a queue. ``None`` for another shape.
    """
    named = object_named(args, kwargs)
    if named is None:
        return None
    app_label, model_name, pk = named
    return f"{app_label.lower()}.{model_name.lower()}:{pk}"


def first_argument(args: list[Any], kwargs: dict[str, Any]) -> str | None:
    """The call's first positional argument as canonical JSON (``None`` if it has none)."""
    if not args:
        return None
    return json.dumps(args[0], sort_keys=True, separators=(",", ":"))


def whole_call(args: list[Any], kwargs: dict[str, Any]) -> str:
    """Every argument: identical calls share a queue (and so never overlap)."""
    return json.dumps([args, kwargs], sort_keys=True, separators=(",", ":"))


def key_queue(task_path: str, key: str) -> str:
    """The serial queue of ``key`` for the task at ``task_path`` (hashed if too long)."""
    queue = f"{KEY_QUEUE_PREFIX}{task_path}:{key}"
    if len(queue) <= validation.IDENTIFIER_MAX:
        return queue
    digest = hashlib.sha256(f"{task_path}:{key}".encode()).hexdigest()
    return f"{KEY_QUEUE_PREFIX}{task_path[:150]}:sha256:{digest}"
