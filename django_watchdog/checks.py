"""System checks for the settings watchdog needs (ids ``django_watchdog.E00x``/``W00x``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.db import connections, router

from . import supported_databases
from .conf import DEFAULTS
from .domain import validation
from .domain.errors import InvalidInput
from .models import Job
from .pooler import check_pooler
from .store.batches import BATCH_MAX

POSITIVE_NUMBERS = (
    "POLL_INTERVAL",
    "HEARTBEAT_INTERVAL",
    "WORKER_TIMEOUT",
    "SHUTDOWN_GRACE",
    "TIMEOUT_GRACE",
)


#: Worker connection settings: ``None`` (leave the server's) or a positive number of
#: seconds (a count for ``TCP_KEEPALIVES_COUNT``).
SESSION_SETTINGS = (
    "IDLE_IN_TRANSACTION_TIMEOUT",
    "TCP_KEEPALIVES_IDLE",
    "TCP_KEEPALIVES_INTERVAL",
    "TCP_KEEPALIVES_COUNT",
    "TCP_USER_TIMEOUT",
)
#: Largest value PostgreSQL takes for these (its int settings are 32-bit, in ms or s).
SESSION_MAXIMUM = 2_147_483


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    configured = getattr(settings, "WATCHDOG", None)
    if configured is None:
        return []
    if not isinstance(configured, dict):
        return [checks.Error("WATCHDOG must be a dict.", id="django_watchdog.E001")]
    errors: list[checks.CheckMessage] = []
    for name in configured:
        if name not in DEFAULTS:
            errors.append(
                checks.Error(
                    f"WATCHDOG[{name!r}] is not a watchdog setting.",
                    hint=f"Known settings: {', '.join(sorted(DEFAULTS))}.",
                    id="django_watchdog.E002",
                )
            )
    errors.extend(_check_database_bounds(configured))
    for name in POSITIVE_NUMBERS:
        try:
            validation.interval(configured.get(name, DEFAULTS[name]), f"WATCHDOG[{name!r}]")
        except InvalidInput as error:
            errors.append(checks.Error(f"{error}.", id="django_watchdog.E003"))
    cap = configured.get("MAX_PAYLOAD_BYTES", DEFAULTS["MAX_PAYLOAD_BYTES"])
    if isinstance(cap, bool) or not isinstance(cap, int) or cap <= 0:
        errors.append(
            checks.Error(
                "WATCHDOG['MAX_PAYLOAD_BYTES'] must be a positive int.", id="django_watchdog.E004"
            )
        )
    batch = configured.get("BATCH", DEFAULTS["BATCH"])
    if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= BATCH_MAX:
        errors.append(
            checks.Error(
                f"WATCHDOG['BATCH'] must be an int from 1 to {BATCH_MAX}.",
                id="django_watchdog.E006",
            )
        )
    heartbeat = configured.get("HEARTBEAT_INTERVAL", DEFAULTS["HEARTBEAT_INTERVAL"])
    timeout = configured.get("WORKER_TIMEOUT", DEFAULTS["WORKER_TIMEOUT"])
    if not errors and timeout < 2 * heartbeat:
        errors.append(
            checks.Error(
                "WATCHDOG['WORKER_TIMEOUT'] must be at least twice HEARTBEAT_INTERVAL.",
                hint="Otherwise a live but busy worker's jobs would be recovered under it.",
                id="django_watchdog.E005",
            )
        )
    return errors


def _check_database_bounds(configured: dict[str, Any]) -> list[checks.CheckMessage]:
    """``LOCK_TIMEOUT`` and the worker connection settings: what PostgreSQL accepts."""
    errors: list[checks.CheckMessage] = []
    for name in ("LOCK_TIMEOUT", *SESSION_SETTINGS):
        value = configured.get(name, DEFAULTS[name])
        if value is None and name != "LOCK_TIMEOUT":
            continue
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not 0 < value <= SESSION_MAXIMUM
        ):
            allowed = "a" if name == "LOCK_TIMEOUT" else "None or a"
            errors.append(
                checks.Error(
                    f"WATCHDOG[{name!r}] must be {allowed} positive number up to "
                    f"{SESSION_MAXIMUM}.",
                    id="django_watchdog.E014",
                )
            )
    return errors


def check_operations(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``RETENTION``, ``SCHEDULES`` and ``ID_RETENTION`` (ids E010, E011, E013)."""
    from .schedules import load

    errors: list[checks.CheckMessage] = []
    configured = getattr(settings, "WATCHDOG", None)
    retention = configured.get("RETENTION") if isinstance(configured, dict) else None
    if retention is not None:
        try:
            validation.age(retention, "WATCHDOG['RETENTION']")
        except InvalidInput as error:
            errors.append(
                checks.Error(
                    f"{error}.",
                    hint="None keeps settled jobs forever; otherwise a number of seconds "
                    "or a timedelta.",
                    id="django_watchdog.E010",
                )
            )
    errors.extend(checks.Error(problem, id="django_watchdog.E011") for problem in load()[1])
    id_retention = configured.get("ID_RETENTION") if isinstance(configured, dict) else None
    if id_retention is not None and not (
        _period_covers(id_retention, retention) and _reachable(id_retention)
    ):
        errors.append(
            checks.Error(
                "WATCHDOG['ID_RETENTION'] must be None or a positive number of seconds "
                "(or a timedelta), no shorter than RETENTION.",
                hint="Pruned job ids are kept that long after their jobs settled.",
                id="django_watchdog.E013",
            )
        )
    return errors


def _reachable(period: object) -> bool:
    """Whether ``now - period`` is a date (``validation.age``: at most 1,000 years)."""
    try:
        validation.age(period, "period")
    except InvalidInput:
        return False
    return True


def _period_covers(value: object, shorter: object) -> bool:
    """Whether ``value`` is a positive period (seconds or a timedelta) and, if ``shorter``
    is a period too, at least as long."""
    from datetime import timedelta

    def seconds(period: object) -> float | None:
        if isinstance(period, timedelta):
            return period.total_seconds()
        if isinstance(period, int | float) and not isinstance(period, bool):
            return float(period)
        return None

    length, floor = seconds(value), seconds(shorter)
    return length is not None and length > 0 and (floor is None or length >= floor)


def check_sqlite(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """SQLite needs a recent enough library, write transactions that take the lock up
    front, and a busy timeout."""
    warnings: list[checks.CheckMessage] = []
    for alias, database in settings.DATABASES.items():
        if "sqlite3" not in database.get("ENGINE", ""):
            continue
        if supported_databases.SQLITE_VERSION < supported_databases.SQLITE_MINIMUM:
            have, need = (
                ".".join(map(str, version))
                for version in (
                    supported_databases.SQLITE_VERSION,
                    supported_databases.SQLITE_MINIMUM,
                )
            )
            warnings.append(
                checks.Error(
                    f"DATABASES[{alias!r}] is SQLite {have}; watchdog needs {need} or newer.",
                    hint="Python's sqlite3 module uses the system's SQLite library; "
                    "upgrade it, or run on PostgreSQL.",
                    id="django_watchdog.E012",
                )
            )
        options: Any = database.get("OPTIONS") or {}  # typed per driver by django-stubs
        if str(options.get("transaction_mode", "")).upper() != "IMMEDIATE":
            warnings.append(
                checks.Warning(
                    f"DATABASES[{alias!r}] is SQLite without "
                    "OPTIONS['transaction_mode'] = 'IMMEDIATE'.",
                    hint="Concurrent writers then fail with 'database is locked'; "
                    "see docs/how-to/sqlite.md.",
                    id="django_watchdog.W001",
                )
            )
        if not options.get("timeout"):
            warnings.append(
                checks.Warning(
                    f"DATABASES[{alias!r}] is SQLite without OPTIONS['timeout'] (a busy timeout).",
                    hint="Set it to e.g. 20 seconds so writers wait for each other.",
                    id="django_watchdog.W002",
                )
            )
        if "journal_mode=wal" not in str(options.get("init_command", "")).lower().replace(" ", ""):
            warnings.append(
                checks.Warning(
                    f"DATABASES[{alias!r}] is SQLite without WAL mode.",
                    hint="Add 'PRAGMA journal_mode=WAL;' to OPTIONS['init_command'] "
                    "so readers never block the writer.",
                    id="django_watchdog.W003",
                )
            )
    return warnings


def check_backport_task_backends(
    app_configs: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """The task backends' checks where no framework runs them: the ``django-tasks``
    backport registers its check only when its app is installed, which Wagtail does not
    ask for. (Django 6's ``django.tasks`` always runs them.)"""
    from django.apps import apps

    from .tasks.registration import backend_lanes

    aliases = backend_lanes()
    if not aliases or apps.is_installed("django_tasks"):
        return []
    from .tasks import framework

    if framework.NATIVE:
        return []
    messages: list[checks.CheckMessage] = []
    for alias in aliases:
        messages.extend(framework.task_backends[alias].check())
    return messages


def check_database(
    app_configs: Any = None, databases: Any = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Every database watchdog's tables may live on is one watchdog runs on (E016).

    Runs on every ``check``; the server is asked what it is (MariaDB or MySQL) only for the
    aliases Django passes as ``databases`` (``check --database``, ``migrate``, tests).
    SQLite's version is ``E012``'s.
    """
    errors: list[checks.CheckMessage] = []
    for alias in settings.DATABASES:
        if not router.allow_migrate_model(alias, Job):
            continue
        if connections[alias].vendor == "sqlite":
            continue
        problem = supported_databases.refusal(alias, connect=alias in (databases or ()))
        if problem is not None:
            errors.append(
                checks.Error(
                    problem,
                    hint="Run watchdog's tables on a supported database (DATABASE_ROUTERS "
                    "may place them apart from the project's other tables).",
                    id="django_watchdog.E016",
                )
            )
    return errors


def register() -> None:
    checks.register(check_backport_task_backends, "django_watchdog")
    checks.register(check_settings, "django_watchdog")
    checks.register(check_database, "django_watchdog")
    checks.register(check_sqlite, "django_watchdog")
    checks.register(check_operations, "django_watchdog")
    checks.register(check_pooler, "django_watchdog")
