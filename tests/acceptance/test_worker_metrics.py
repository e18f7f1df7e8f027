"""``watchdog_worker --metrics-port``: a real worker serves its own figures over HTTP."""

import re
import signal
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

import django_watchdog as wd
from django_watchdog.models import Job

from .conftest import wait_until

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def endpoint(worker):
    """The URL the worker's banner names, once it is printed."""
    found = wait_until(
        lambda: re.search(r"metrics:\s+http://[^:]+:(\d+)/metrics", worker.output()),
        message=f"the metrics line in the banner; output:\n{worker.output()}",
    )
    return f"http://127.0.0.1:{found.group(1)}/metrics"


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - local test URL
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def settled(*job_ids):
    return Job.objects.filter(job_id__in=job_ids, state="settled").count() == len(job_ids)


def test_the_worker_serves_its_handler_run_times(spawn_worker):
    worker = spawn_worker("--metrics-port", "0", "--lane", "t-record", "--lane", "t-fail")
    url = endpoint(worker)
    wd.enqueue("ok", queue="a", lane="t-record")
    wd.enqueue("fails", queue="b", lane="t-fail")
    wait_until(lambda: settled("ok", "fails"), message="both jobs settled")

    figures = scrape(url)
    count = "watchdog_worker_job_run_seconds_count"
    assert figures[count, (("ended", "returned"), ("lane", "t-record"))] == 1
    assert figures[count, (("ended", "raised"), ("lane", "t-fail"))] == 1
    assert figures["watchdog_worker_jobs_in_progress", (("lane", "t-record"),)] == 0
    assert ("process_cpu_seconds_total", ()) in figures
    # The database's figures are served by the view unless asked for here.
    assert not any(name == "watchdog_jobs_queued" for name, _ in figures)

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()


def test_with_metrics_database_the_worker_serves_the_database_figures_too(spawn_worker):
    worker = spawn_worker("--metrics-port", "0", "--metrics-database", "--lane", "t-record")
    url = endpoint(worker)
    wd.enqueue("ok", queue="a", lane="t-record")
    wait_until(lambda: settled("ok"), message="the job settled")

    figures = wait_until(
        lambda: (
            (f := scrape(url)).get(("watchdog_lane_live_workers", (("lane", "t-record"),))) and f
        ),
        message="the worker counted live on its lane",
    )
    assert (
        figures["watchdog_jobs_settled_recent", (("lane", "t-record"), ("outcome", "completed"))]
        == 1
    )
    assert figures["watchdog_database_up", ()] == 1
    # The database was read on a scrape thread; nothing of it is left open or broken.
    assert scrape(url)["watchdog_database_up", ()] == 1

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
