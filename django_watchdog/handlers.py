"""The lane → handler registry filled by ``@handler("lane")`` in ``<app>/jobs.py`` modules."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

from .domain import validation
from .domain.errors import InvalidInput
from .domain.retries import RetryPolicy

HandlerFunction = Callable[[Any], Any]
F = TypeVar("F", bound=HandlerFunction)

#: The module name autodiscovered in every installed app, as Django does for ``admin.py``.
HANDLER_MODULE = "jobs"

_registry: dict[str, HandlerFunction] = {}
_options: dict[str, HandlerOptions] = {}


@dataclass(frozen=True, kw_only=True, slots=True)
class HandlerOptions:
    """A lane's defaults; a job's own ``retry``/``timeout`` (from enqueue) wins over them."""

    retry: RetryPolicy | None = None
    timeout: float | None = None


NO_OPTIONS = HandlerOptions()


class HandlerConflict(ImproperlyConfigured):
    """Two different functions were registered for one lane."""


def handler(
    lane: str, *, retry: RetryPolicy | None = None, timeout: float | None = None
) -> Callable[[F], F]:
    """Register the decorated function as the one handler of ``lane``.

    ``retry`` retries failures with backoff; ``timeout`` (seconds) turns ``cancel_requested``
    on at the deadline and, after ``WATCHDOG['TIMEOUT_GRACE']``, settles the job
    ``outcome_unknown`` and frees the worker slot.
    """
    lane = validation.lane(lane)
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise InvalidInput("retry", f"must be a RetryPolicy or None, not {type(retry).__name__}")
    options = HandlerOptions(retry=retry, timeout=validation.seconds(timeout, "timeout"))

    def register(function: F) -> F:
        existing = _registry.get(lane)
        if existing is not None and _qualified(existing) != _qualified(function):
            raise HandlerConflict(
                f"lane {lane!r} already has handler {_qualified(existing)}; "
                f"cannot also register {_qualified(function)}"
            )
        _registry[lane] = function
        _options[lane] = options
        return function

    return register


def registered() -> dict[str, HandlerFunction]:
    """A copy of the registry: lane → handler."""
    return dict(_registry)


def registered_options() -> dict[str, HandlerOptions]:
    """A copy of every registered lane's defaults: lane → retry and timeout (what a worker
    is given as ``lane_options``)."""
    return dict(_options)


def options(lane: str) -> HandlerOptions:
    """The retry and timeout defaults registered with ``lane``'s handler."""
    return _options.get(lane, NO_OPTIONS)


def unregister(lane: str) -> None:
    """Forget ``lane``'s handler (for tests)."""
    _registry.pop(lane, None)
    _options.pop(lane, None)


def autodiscover() -> None:
    """Import ``jobs`` from every installed app so its ``@handler`` lines run."""
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules(HANDLER_MODULE)


def _qualified(function: HandlerFunction) -> str:
    return f"{getattr(function, '__module__', '?')}.{getattr(function, '__qualname__', function)}"
