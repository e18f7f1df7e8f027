"""Periodic schedules declared in code (``schedule(...)`` in ``<app>/jobs.py``) or settings.

``WATCHDOG["SCHEDULES"] = {"name": {"cron": "*/5 * * * *", "lane": ..., ...}}`` takes the
same options as ``schedule()``. Every worker enqueues due ticks; see docs/how-to/schedules.md.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .conf import setting
from .domain.errors import InvalidInput
from .engine.schedules import DEFAULT_GRACE, Schedule, tick_of

__all__ = ["Schedule", "ScheduleConflict", "configured", "schedule", "tick_of", "unregister"]

OPTIONS = (
    "cron",
    "queue",
    "lane",
    "priority",
    "payload",
    "max_recoveries",
    "missed",
    "grace",
    "timezone",
)

_registry: dict[str, Schedule] = {}


class ScheduleConflict(ImproperlyConfigured):
    """One schedule name was declared twice with different options."""


def schedule(
    name: str,
    *,
    cron: str,
    queue: str | None = None,
    lane: str = "default",
    priority: int = 0,
    payload: Any = None,
    max_recoveries: int | None = None,
    missed: str = "latest",
    grace: float = DEFAULT_GRACE,
    timezone: str | None = None,
) -> Schedule:
    """Register a periodic schedule: a job every ``cron`` tick, on ``queue`` (one per tick).

    ``queue`` defaults to ``"schedule:<name>"`` (so runs of one schedule never overlap),
    ``timezone`` to ``settings.TIME_ZONE``. ``missed`` is what a worker does with ticks that
    passed while no worker ran: ``"latest"``, ``"all"`` (at most 100) or ``"skip"``.
    """
    try:
        parsed = _parse(
            name,
            {
                "cron": cron,
                "queue": queue,
                "lane": lane,
                "priority": priority,
                "payload": payload,
                "max_recoveries": max_recoveries,
                "missed": missed,
                "grace": grace,
                "timezone": timezone,
            },
        )
    except InvalidInput as error:
        raise ImproperlyConfigured(f"schedule {name!r}: {error}") from error
    existing = _registry.get(parsed.name)
    if existing is not None and existing != parsed:
        raise ScheduleConflict(f"schedule {parsed.name!r} is already registered differently")
    _registry[parsed.name] = parsed
    return parsed


def unregister(name: str) -> None:
    """Forget the code-registered schedule ``name`` (for tests)."""
    _registry.pop(name, None)


def registered() -> dict[str, Schedule]:
    """A copy of the code registry: name → schedule."""
    return dict(_registry)


def configured() -> dict[str, Schedule]:
    """Every schedule, from settings and code; raise ``ImproperlyConfigured`` if one is bad."""
    schedules, problems = load()
    if problems:
        raise ImproperlyConfigured("; ".join(problems))
    return schedules


def load() -> tuple[dict[str, Schedule], list[str]]:
    """Every schedule that parses, and a message per one that does not (system checks)."""
    schedules = dict(_registry)
    problems: list[str] = []
    declared = setting("SCHEDULES") or {}
    if not isinstance(declared, dict):
        return schedules, ["WATCHDOG['SCHEDULES'] must be a dict: name → options"]
    for name, options in declared.items():
        where = f"WATCHDOG['SCHEDULES'][{name!r}]"
        if not isinstance(options, dict):
            problems.append(f"{where} must be a dict of options")
            continue
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            problems.append(f"{where}: unknown option {unknown[0]!r} (known: {', '.join(OPTIONS)})")
            continue
        try:
            parsed = _parse(name, options)
        except InvalidInput as error:
            problems.append(f"{where}: {error}")
            continue
        if parsed.name in schedules and schedules[parsed.name] != parsed:
            problems.append(f"{where} is also registered in code, with other options")
            continue
        schedules[parsed.name] = parsed
    return schedules, problems


def _parse(name: object, options: dict[str, Any]) -> Schedule:
    options = dict(options)
    if "cron" not in options:
        raise InvalidInput("cron", "is required")
    if options.get("timezone") is None:
        options["timezone"] = settings.TIME_ZONE or "UTC"
    if options.get("grace") is None:
        options.pop("grace", None)
    return Schedule.parse(name, **options)
