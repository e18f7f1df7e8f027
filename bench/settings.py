"""Django settings for the Django-based systems under test: BENCH_SYSTEM, BENCH_DB pick them.

watchdog: django_watchdog with the bench handlers (bench/benchapp/jobs.py).
tasks_db: Django's django.tasks with the django-tasks-db backend (bench/benchapp/tasks.py).
Both use the same database settings: PostgreSQL on 127.0.0.1, MariaDB on 127.0.0.1 (the test
user of scripts/ensure-mariadb, or the user ``bench`` that bench.bench creates and passes in
MARIADB_USER; at READ COMMITTED as watchdog requires), or a WAL-mode SQLite file.
BENCH_DB_SUFFIX is appended to the server databases' names (bench tests run beside a bench).
"""

import os

SYSTEM = os.environ.get("BENCH_SYSTEM", "watchdog")
DB = os.environ.get("BENCH_DB", "sqlite")
SUFFIX = os.environ.get("BENCH_DB_SUFFIX", "")
DB_NAMES = {
    "watchdog": ("bench_watchdog" if DB == "mariadb" else "watchdog_bench") + SUFFIX,
    "tasks_db": "bench_tasks_db" + SUFFIX,
}
if os.environ.get("BENCH_DB_NAME"):  # a scratch database of its own (bench/roundtrips.py)
    DB_NAMES[SYSTEM] = os.environ["BENCH_DB_NAME"]
SQLITE_DIR = os.environ.get("BENCH_SQLITE_DIR", "/tmp/django-watchdog-bench")

SECRET_KEY = "bench-only-not-secret"  # noqa: S105
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"


def server(engine: str, env: str, user: str, port: str, **more: object) -> dict[str, object]:
    """A database server on 127.0.0.1 (or ``<env>HOST``), as ``<env>USER`` on ``<env>PORT``."""
    return {
        "ENGINE": f"django.db.backends.{engine}",
        "NAME": DB_NAMES[SYSTEM],
        "USER": os.environ.get(f"{env}USER", user),
        "HOST": os.environ.get(f"{env}HOST", "127.0.0.1"),
        "PORT": os.environ.get(f"{env}PORT", port),
        **more,
    }


if DB == "postgres":
    DATABASES = {"default": server("postgresql", "PG", "postgres", "5432")}
elif DB == "mariadb":
    DATABASES = {
        "default": server(
            "mysql",
            "MARIADB_",
            "watchdog",
            "3306",
            PASSWORD=os.environ.get("MARIADB_PASSWORD", "watchdog"),
            OPTIONS={"charset": "utf8mb4", "isolation_level": "read committed"},
        )
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.path.join(SQLITE_DIR, f"{DB_NAMES[SYSTEM]}.sqlite3"),
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }

INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]
if SYSTEM == "watchdog":
    INSTALLED_APPS += ["django_watchdog", "bench.benchapp"]
    # PostgreSQL wakes workers with NOTIFY, SQLite with a data_version check on each write to
    # its files, MariaDB with a probe every 0.1 s; the poll interval is only the fallback,
    # so the defaults are the fastest.
    WATCHDOG: dict[str, object] = {}
elif SYSTEM == "tasks_db":
    INSTALLED_APPS += ["django_tasks_db", "bench.benchapp"]
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
else:  # pragma: no cover
    raise RuntimeError(f"BENCH_SYSTEM must be watchdog or tasks_db, not {SYSTEM!r}")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
