"""Test settings: the database comes from WATCHDOG_TEST_DB (sqlite | postgres | pgbouncer |
mariadb)."""

import os
import tempfile
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "tests-only-not-secret"  # noqa: S105
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_watchdog",
    "tests.testapp",
]

ENGINE = os.environ.get("WATCHDOG_TEST_DB", "sqlite")
SQLITE_DIR = Path(os.environ.get("WATCHDOG_SQLITE_DIR", tempfile.gettempdir()))
DB_SUFFIX = os.environ.get("WATCHDOG_TEST_DB_SUFFIX", "")

DATABASES: dict[str, dict[str, Any]]
POSTGRES = {
    "ENGINE": "django.db.backends.postgresql",
    "NAME": "watchdog" + DB_SUFFIX,
    "USER": os.environ.get("PGUSER", "postgres"),
    "HOST": os.environ.get("PGHOST", "127.0.0.1"),
    "PORT": os.environ.get("PGPORT", "5432"),
    "TEST": {"NAME": "test_watchdog" + DB_SUFFIX},
}
if ENGINE == "postgres":
    DATABASES = {"default": POSTGRES}
elif ENGINE == "pgbouncer":
    # PostgreSQL through PgBouncer in transaction pooling mode (scripts/ensure-pgbouncer),
    # with a direct connection to the same database for LISTEN only. "direct" is never set
    # up as a test database: it names the test database itself.
    DATABASES = {
        "default": {
            **POSTGRES,
            "HOST": "127.0.0.1",
            "PORT": os.environ.get("WATCHDOG_PGBOUNCER_PORT", "6439"),
            "DISABLE_SERVER_SIDE_CURSORS": True,
        },
        "direct": {**POSTGRES, "NAME": "test_watchdog" + DB_SUFFIX, "TEST": {}},
    }
elif ENGINE == "sqlite":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(SQLITE_DIR / f"watchdog{DB_SUFFIX}.sqlite3"),
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
            # A real file, so worker subprocesses and threads share it.
            "TEST": {"NAME": str(SQLITE_DIR / f"test_watchdog{DB_SUFFIX}.sqlite3")},
        }
    }
elif ENGINE == "mariadb":
    # scripts/ensure-mariadb creates the user and its rights. Connections read committed
    # rows at each statement, as on PostgreSQL (docs/explanation/mariadb-dialect.md), and
    # strict mode makes a value the column cannot hold an error, never a silent truncation.
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "NAME": "watchdog" + DB_SUFFIX,
            "USER": os.environ.get("MARIADB_USER", "watchdog"),
            "PASSWORD": os.environ.get("MARIADB_PASSWORD", "watchdog"),
            "HOST": os.environ.get("MARIADB_HOST", "127.0.0.1"),
            "PORT": os.environ.get("MARIADB_PORT", "3306"),
            "OPTIONS": {
                "charset": "utf8mb4",
                "isolation_level": "read committed",
                "init_command": "SET SESSION sql_mode = CONCAT_WS(',', @@sql_mode, "
                "'STRICT_ALL_TABLES', 'NO_ZERO_DATE', 'NO_ZERO_IN_DATE', "
                "'ERROR_FOR_DIVISION_BY_ZERO', 'NO_ENGINE_SUBSTITUTION')",
            },
            # The server's default collation (case-insensitive), as most sites have it:
            # the migrations must make watchdog's own columns exact whatever it is.
            "TEST": {"NAME": "test_watchdog" + DB_SUFFIX, "CHARSET": "utf8mb4"},
        }
    }
else:  # pragma: no cover
    raise RuntimeError(
        f"WATCHDOG_TEST_DB must be sqlite, postgres, pgbouncer or mariadb, not {ENGINE!r}"
    )

# Worker subprocesses started by tests point at the test database through this variable.
if os.environ.get("WATCHDOG_DB_NAME"):
    for alias in DATABASES:
        DATABASES[alias]["NAME"] = os.environ["WATCHDOG_DB_NAME"]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.urls"
# The browser test's live server serves the admin's CSS and JavaScript from here.
STATIC_URL = "/static/"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# django.tasks on watchdog (tests/glue/test_tasks_*.py); lanes of their own, so tests that
# register handlers for "default" do not clash with the task runner.
TASKS = {
    "default": {
        "BACKEND": "django_watchdog.backend.WatchdogBackend",
        "QUEUES": ["tasks", "tasks-bulk"],
    }
}
WATCHDOG: dict[str, Any] = {
    "POLL_INTERVAL": 0.05,
    "HEARTBEAT_INTERVAL": 0.5,
    "WORKER_TIMEOUT": 3.0,
    "TIMEOUT_GRACE": 0.5,
}
if ENGINE == "pgbouncer":
    WATCHDOG.update(TRANSACTION_POOLER=True, LISTEN_DATABASE="direct")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_watchdog": {"handlers": ["console"], "level": "INFO"}},
}
