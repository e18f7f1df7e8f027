"""The lane → handler registry filled by ``@handler("lane")`` in ``<app>/jobs.py`` modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

from .domain import validation

HandlerFunction = Callable[[Any], Any]
F = TypeVar("F", bound=HandlerFunction)

#: The module name autodiscovered in every installed app, as Django does for ``admin.py``.
HANDLER_MODULE = "jobs"

_registry: dict[str, HandlerFunction] = {}


class HandlerConflict(ImproperlyConfigured):
    """Two different functions were registered for one lane."""


def handler(lane: str) -> Callable[[F], F]:
    """Register the decorated function as the one handler of ``lane``."""
    lane = validation.lane(lane)

    def register(function: F) -> F:
        existing = _registry.get(lane)
        if existing is not None and _qualified(existing) != _qualified(function):
            raise HandlerConflict(
                f"lane {lane!r} already has handler {_qualified(existing)}; "
                f"cannot also register {_qualified(function)}"
            )
        _registry[lane] = function
        return function

    return register


def registered() -> dict[str, HandlerFunction]:
    """A copy of the registry: lane → handler."""
    return dict(_registry)


def unregister(lane: str) -> None:
    """Forget ``lane``'s handler (for tests)."""
    _registry.pop(lane, None)


def autodiscover() -> None:
    """Import ``jobs`` from every installed app so its ``@handler`` lines run."""
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules(HANDLER_MODULE)


def _qualified(function: HandlerFunction) -> str:
    return f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', function)}"
