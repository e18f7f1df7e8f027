"""A stopping worker closes every connection it opened (issue 18): on PostgreSQL the
heartbeat thread's was left open at exit (a ResourceWarning)."""

import signal

import pytest

import django_watchdog as wd

from ..acceptance.conftest import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

WARNINGS = {
    "PYTHONWARNINGS": "always::ResourceWarning",
    # The heartbeat thread sleeps through the worker's whole life unless stopping wakes it.
    "DJANGO_SETTINGS_MODULE": "tests.faults.slow_heartbeat_settings",
}


@pytest.mark.parametrize("how", ["burst", "sigterm"])
def test_a_stopping_worker_leaves_no_connection_open(spawn_worker, runs, how):
    wd.enqueue("job", queue="q", lane="t-record", payload={"result": 1})
    if how == "burst":
        worker = spawn_worker("--burst", env=WARNINGS)
    else:
        worker = spawn_worker(env=WARNINGS)
        wait_until(lambda: wd.get_job("job").state == "settled", message="the job to settle")
        worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    assert wd.get_job("job").result == 1
    assert "ResourceWarning" not in worker.output(), worker.output()
