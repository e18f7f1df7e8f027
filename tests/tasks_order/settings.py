"""Settings for tests/glue/test_tasks_start_up.py: WATCHDOG_ORDER=first|last places
django_watchdog before or after the app that imports tasks in its ready()."""

import os
import tempfile
from pathlib import Path

SECRET_KEY = "tests-only-not-secret"  # noqa: S105
USE_TZ = True
APPS = ["tests.tasks_order.early.apps.EarlyConfig", "tests.tasks_order.project"]
if os.environ.get("WATCHDOG_ORDER") == "last":
    INSTALLED_APPS = [*APPS, "django_watchdog"]
else:
    INSTALLED_APPS = ["django_watchdog", *APPS]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(Path(tempfile.gettempdir()) / "watchdog-tasks-order.sqlite3"),
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
TASKS = {
    "default": {
        "BACKEND": "django_watchdog.backend.WatchdogBackend",
        "QUEUES": ["default"],
        "OPTIONS": {"NOT_AN_OPTION": 1},
    }
}
