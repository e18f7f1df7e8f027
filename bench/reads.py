"""What an operator reads, timed on the benchmark's tables: ``manage.py watchdog status`` and
the admin's job list and queue list (default filters, first page).

The command runs in-process (``call_command``: what ``manage.py watchdog status`` costs
after Python and Django have started); the pages through Django's test client, logged in
as a superuser, the whole request (middleware, view, queries, template). Each is timed
``times`` times after one untimed warm-up (which fills caches and the session), in
milliseconds. Runs inside bench.admin_settings (bench.driver).
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

#: The superuser the pages are read as (created on first use).
READER = "bench-reader"


def _timed(read: Callable[[], object], times: int) -> list[float]:
    read()
    runs = []
    for _ in range(times):
        started = time.perf_counter()
        read()
        runs.append((time.perf_counter() - started) * 1000)
    return runs


def _page(client: Client, url: str) -> Callable[[], object]:
    def read() -> object:
        response = client.get(url)
        if response.status_code != 200:
            raise SystemExit(f"{url} answered {response.status_code}")
        return response

    return read


def reads(args: dict[str, Any]) -> dict[str, Any]:
    """Milliseconds of each read, ``times`` runs each."""
    times = int(args["times"])
    call_command("migrate", verbosity=0)  # the admin's tables, beside watchdog's
    user, _ = get_user_model().objects.get_or_create(
        username=READER, defaults={"is_staff": True, "is_superuser": True}
    )
    client = Client()
    client.force_login(user)

    def status() -> object:
        return call_command("watchdog", "status", stdout=io.StringIO())

    return {
        "status_ms": _timed(status, times),
        "admin_jobs_ms": _timed(
            _page(client, reverse("admin:django_watchdog_job_changelist")), times
        ),
        "admin_queues_ms": _timed(
            _page(client, reverse("admin:django_watchdog_queue_changelist")), times
        ),
    }
