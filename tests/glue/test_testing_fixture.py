"""The ``watchdog_jobs`` pytest fixture (``django_watchdog.testing.pytest``), in plain
pytest-django tests: a test's transaction stays open while its jobs run inline."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db import connection

import django_watchdog as watchdog
from tests.testapp import inline_handlers  # noqa: F401 - registers the i-* lanes
from tests.testapp.views import WELCOME_LANE


def test_the_fixture_runs_a_views_job_inside_the_tests_transaction(client, watchdog_jobs):
    response = client.post("/signup", {"username": "ann"})
    assert response.status_code == 201
    assert connection.in_atomic_block
    (job,) = watchdog_jobs.enqueued(lane=WELCOME_LANE)

    (run,) = watchdog_jobs.run()

    assert (run.job_id, run.outcome, run.result) == (job.job_id, "completed", "welcome ann")
    assert watchdog_jobs.enqueued() == []


def test_the_fixture_captures_what_a_block_enqueued(watchdog_jobs):
    user = User.objects.create(username="bob")
    with watchdog_jobs.capture() as captured:
        watchdog.enqueue(
            "welcome:bob", queue="user:bob", lane=WELCOME_LANE, payload={"user": user.pk}
        )
    assert [(j.job_id, j.state) for j in captured] == [("welcome:bob", "queued")]
    assert [r.outcome for r in watchdog_jobs.run(lanes=[WELCOME_LANE])] == ["completed"]


def test_the_fixture_passes_options_through(watchdog_jobs):
    watchdog.enqueue("sync:1", queue="sync:1", lane="i-flaky", payload={"succeed_at": 2})
    (run,) = watchdog_jobs.run(retries="wait")
    assert run.outcome == "retrying"
