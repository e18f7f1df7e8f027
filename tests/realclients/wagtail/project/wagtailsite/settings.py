"""A small Wagtail 8 site whose background tasks run on watchdog or on ImmediateBackend.

Environment: WAGTAIL_DB (sqlite | postgres), WAGTAIL_DB_NAME (file or database name),
WAGTAIL_MEDIA (media root), WAGTAIL_BACKEND (watchdog | immediate), WAGTAIL_KEYS (1: the
recommended per-object serial keys and coalescing, 0: none).
"""

import importlib.util
import os
from pathlib import Path

SECRET_KEY = "real-client-test-only"  # noqa: S105
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "wagtailsite.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
WAGTAIL_SITE_NAME = "real client"
WAGTAILADMIN_BASE_URL = "http://example.com"
MEDIA_ROOT = os.environ.get("WAGTAIL_MEDIA", str(Path(__file__).resolve().parent / "media"))
MEDIA_URL = "/media/"
STATIC_URL = "/static/"
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

INSTALLED_APPS = [
    "home",
    "wagtail.contrib.forms",
    "wagtail.contrib.redirects",
    "wagtail.sites",
    "wagtail.users",
    "wagtail.snippets",
    "wagtail.documents",
    "wagtail.images",
    "wagtail.search",
    "wagtail.admin",
    "wagtail",
    "modelcluster",
    "taggit",
    "django_filters",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    # After the Wagtail apps on purpose: their task modules build the backend first.
    "django_watchdog",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
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
WAGTAILSEARCH_BACKENDS = {"default": {"BACKEND": "wagtail.search.backends.database"}}

if os.environ.get("WAGTAIL_DB", "sqlite") == "postgres":
    INSTALLED_APPS.append("django.contrib.postgres")  # the search backend's fields
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("WAGTAIL_DB_NAME", "wagtail_real_client"),
            "USER": os.environ.get("PGUSER", "postgres"),
            "HOST": os.environ.get("PGHOST", "127.0.0.1"),
            "PORT": os.environ.get("PGPORT", "5432"),
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("WAGTAIL_DB_NAME", "wagtail.sqlite3"),
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }

# --8<-- [start:recommended]
#: Wagtail's tasks that read one object and write what follows from it (reference index,
#: search index, image focal point). Each is called as (app_label, model_name, pk).
WAGTAIL_OBJECT_TASKS = [
    "wagtail.tasks.update_reference_index_task",
    "modelsearch.tasks.insert_or_update_object_task",
    "wagtail.images.tasks.set_image_focal_point_task",
]
WATCHDOG_TASKS = {
    "BACKEND": "django_watchdog.backend.WatchdogBackend",
    # Wagtail enqueues on the queue "default" (served by the watchdog lane "task:default").
    "QUEUES": ["default"],
    "OPTIONS": {
        # Updates of one object run one at a time, in order...
        "SERIAL_KEYS": {
            path: "django_watchdog.tasks.keys.model_object" for path in WAGTAIL_OBJECT_TASKS
        },
        # ...and a repeat still waiting behind them is not queued twice.
        "COALESCE": WAGTAIL_OBJECT_TASKS,
        # Each runs in one transaction that first locks its object's row: a request's
        # delete waits for it, then removes what it wrote (no index row outlives its object).
        "ROW_LOCKS": {
            path: "django_watchdog.tasks.locks.model_object" for path in WAGTAIL_OBJECT_TASKS
        },
        # Front-end cache purges of many URLs.
        "MAX_PAYLOAD_BYTES": 8 * 1024 * 1024,
    },
}
# --8<-- [end:recommended]

if os.environ.get("WAGTAIL_KEYS", "1") != "1":
    WATCHDOG_TASKS["OPTIONS"] = {}

if os.environ.get("WAGTAIL_BACKEND", "watchdog") == "immediate":
    framework = "django.tasks" if importlib.util.find_spec("django.tasks") else "django_tasks"
    TASKS = {"default": {"BACKEND": f"{framework}.backends.immediate.ImmediateBackend"}}
else:
    TASKS = {"default": WATCHDOG_TASKS}

WATCHDOG = {"POLL_INTERVAL": 0.05, "HEARTBEAT_INTERVAL": 1.0, "WORKER_TIMEOUT": 10.0}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_watchdog": {"handlers": ["console"], "level": "WARNING"}},
}
