"""Without the ``opentelemetry`` extra: importing, enqueueing and running jobs work as
ever, and nothing tries to import OpenTelemetry (a subprocess where its import fails)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.db import connection

from django_watchdog.models import Job

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import sys

    sys.modules["opentelemetry"] = None  # not installed: any import of it fails

    import django

    django.setup()

    import django_watchdog as watchdog
    import django_watchdog.tracing
    from django_watchdog.backend import enqueue_task
    from django_watchdog.testing import run_jobs
    from tests.tasks_app import tasks
    from tests.testapp import inline_handlers

    watchdog.enqueue("absent:1", queue="absent", lane="i-echo", payload="hi")
    watchdog.enqueue_many([{"job_id": "absent:2", "queue": "absent", "lane": "i-broken"}])
    enqueue_task(tasks.add, (1, 2), job_id="absent:3")
    runs = run_jobs(lanes=["i-echo", "i-broken", "task:tasks"])
    print(sorted((run.job_id, run.outcome) for run in runs))
    print(sorted(name for name in sys.modules if name.startswith("opentelemetry")))
    """
)


@pytest.mark.django_db(transaction=True)
def test_enqueue_and_run_work_and_import_nothing_of_opentelemetry():
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "WATCHDOG_DB_NAME": str(connection.settings_dict["NAME"]),
    }
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    ran, imported = done.stdout.splitlines()[-2:]
    assert ran == str(
        [("absent:1", "completed"), ("absent:2", "failed"), ("absent:3", "completed")]
    )
    assert imported == "['opentelemetry']"  # only the blocked entry itself
    assert Job.objects.filter(trace_context__isnull=False).count() == 0
