"""A real worker through PgBouncer in transaction mode (WATCHDOG_TEST_DB=pgbouncer)."""

import pytest

import django_watchdog as wd
from django_watchdog.models import Job

from .conftest import wait_until

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.pgbouncer_only,
    pytest.mark.django_db(transaction=True),
]

#: Far longer than a wake-up takes: a job started sooner was woken, not polled for.
LONG_POLL = "60"


def test_a_worker_behind_the_pooler_is_woken_through_the_direct_connection(spawn_worker, runs):
    worker = spawn_worker("--poll-interval", LONG_POLL, "--lane", "t-record")
    wd.enqueue("warm-up", queue="warm", lane="t-record")
    # Settled means the worker's settle-and-claim transaction found nothing after it: the
    # next job can only reach it by a wake-up (or the 60 s poll).
    wait_until(
        lambda: wd.get_job("warm-up").state == "settled",
        message=f"the warm-up job settled; {worker.output()}",
    )
    wd.enqueue("woken", queue="w", lane="t-record")
    wait_until(lambda: runs.starts("woken"), timeout=30, message="a wake-up, not the poll")
    worker.signal(15)
    assert worker.wait() == 0, worker.output()


def test_without_a_listen_database_the_worker_polls_and_says_so(spawn_worker, runs):
    worker = spawn_worker(
        "--poll-interval",
        "0.1",
        "--lane",
        "t-record",
        env={"DJANGO_SETTINGS_MODULE": "tests.acceptance.pooler_poll_settings"},
    )
    for n in range(3):
        wd.enqueue(f"j{n}", queue=f"q{n}", lane="t-record")
    wait_until(
        lambda: Job.objects.filter(state="settled").count() == 3, message="every job settled"
    )
    worker.signal(15)
    assert worker.wait() == 0, worker.output()
    assert "event=listen_unavailable reason=transaction_pooler" in worker.output()
