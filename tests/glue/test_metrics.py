"""The Prometheus view: its output parsed, each figure checked against arranged rows."""

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

import django_watchdog as wd
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job
from django_watchdog.store.store import Store
from tests.glue.test_dashboard import live_worker, run, traffic  # noqa: F401 - fixture

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.metrics_urls")]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def scrape(client):
    """{metric name: {labels as a sorted tuple of pairs: value}} from the view."""
    response = client.get("/metrics/")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    found = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def by_lane(figures, name):
    return {dict(labels)["lane"]: value for labels, value in figures.get(name, {}).items()}


def test_the_view_reports_backlog_workers_and_settles_by_lane(client, traffic):  # noqa: F811
    figures = scrape(client)
    assert by_lane(figures, "watchdog_jobs_queued") == {"mail": 0, "reports": 2}
    assert by_lane(figures, "watchdog_jobs_ready") == {"mail": 0, "reports": 1}
    assert by_lane(figures, "watchdog_jobs_running") == {"mail": 0, "reports": 1}
    ages = by_lane(figures, "watchdog_oldest_ready_job_age_seconds")
    assert set(ages) == {"reports"} and 0 <= ages["reports"] < 60
    assert by_lane(figures, "watchdog_lane_live_workers") == {"mail": 1, "reports": 1}
    assert figures["watchdog_live_workers"] == {(): 1}  # w-gone is silent
    settled = {
        (dict(labels)["lane"], dict(labels)["outcome"]): value
        for labels, value in figures["watchdog_jobs_settled_recent"].items()
    }
    assert settled == {("mail", "completed"): 3, ("mail", "failed"): 1, ("reports", "cancelled"): 1}
    assert figures["watchdog_jobs_settled_window_seconds"] == {(): 300}
    assert figures["watchdog_jobs_settled_scan_cut"] == {(): 0}
    assert figures["watchdog_database_up"] == {(): 1}
    assert "watchdog_worker_job_run_seconds_count" not in figures  # a worker's own figure


def test_jobs_settled_before_the_window_are_not_counted(client):
    for n in range(3):
        wd.enqueue(f"j{n}", queue=f"q{n}", lane="mail")
        run(f"j{n}", Decision.completed())
    Job.objects.filter(job_id="j0").update(settled_at=timezone.now() - timedelta(minutes=6))
    figures = scrape(client)
    assert figures["watchdog_jobs_settled_recent"] == {
        (("lane", "mail"), ("outcome", "completed")): 2
    }


def test_a_lane_a_dead_worker_named_reads_as_served_by_nobody(client):
    live_worker("w-gone", lanes=["emails"], age=3600)
    live_worker("w-mail", lanes=["mail"])
    figures = scrape(client)
    assert by_lane(figures, "watchdog_lane_live_workers") == {"emails": 0, "mail": 1}
    assert by_lane(figures, "watchdog_jobs_queued") == {"emails": 0, "mail": 0}


def test_the_settled_count_reads_only_the_newest_jobs(client, monkeypatch):
    from django_watchdog.ops import activity

    for n in range(3):
        wd.enqueue(f"j{n}", queue=f"q{n}", lane="mail")
        run(f"j{n}", Decision.completed())
    monkeypatch.setattr(activity, "SCAN_JOBS", 2)
    figures = scrape(client)
    assert figures["watchdog_jobs_settled_recent"] == {
        (("lane", "mail"), ("outcome", "completed")): 2
    }
    assert figures["watchdog_jobs_settled_scan_cut"] == {(): 1}


def test_ids_far_above_one_are_not_a_cut(client):
    """Only older jobs left out make a cut, not where the id sequence stands (a database
    that has held many jobs, all pruned, starts far above 1)."""
    wd.enqueue("j", queue="q", lane="mail")
    run("j", Decision.completed())
    Job.objects.filter(job_id="j").update(id=300_000)
    figures = scrape(client)
    assert figures["watchdog_jobs_settled_scan_cut"] == {(): 0}
    assert figures["watchdog_jobs_settled_recent"] == {
        (("lane", "mail"), ("outcome", "completed")): 1
    }


def test_the_number_of_queries_does_not_grow_with_jobs_or_workers(client):
    def queries():
        with CaptureQueriesContext(connection) as captured:
            scrape(client)
        return len(captured.captured_queries)

    empty = queries()
    for n in range(30):
        wd.enqueue(f"j{n}", queue=f"q{n % 7}", lane=f"lane-{n % 6}")
    for n in range(5):
        run(f"j{n}", Decision.completed())
    Store().claim(worker_id="w1")
    for n in range(8):
        live_worker(f"w{n}", lanes=[f"lane-{n % 6}"])
    # Each lane with pending jobs: an index probe and its queued and running jobs counted
    # up to a cap (never a count of every pending job).
    assert empty == 7
    assert queries() == empty + 3 * 6


def test_the_view_answers_get_only(client):
    assert client.post("/metrics/").status_code == 405


def test_core_imports_never_load_prometheus_client():
    code = (
        "import sys, django; django.setup()\n"
        "import django_watchdog, django_watchdog.admin, django_watchdog.api\n"
        "from django.core.management import call_command\n"
        "call_command('check')\n"
        "assert 'prometheus_client' not in sys.modules, 'loaded'\n"
    )
    subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        check=True,
    )


def test_without_the_extra_the_import_names_it():
    code = (
        "import sys, django; django.setup()\n"
        "sys.modules['prometheus_client'] = None\n"
        "try:\n"
        "    import django_watchdog.prometheus\n"
        "except Exception as error:\n"
        "    print(type(error).__name__, error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "ImproperlyConfigured" in done.stdout
    assert "pip install 'django-watchdog[prometheus]'" in done.stdout
