"""A housekeeping step that fails on every loop never stops a worker claiming."""

import signal

import pytest

import django_watchdog as wd

from ..acceptance.conftest import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.faults.overflowing_retention_settings"}


def test_a_retention_that_overflows_on_every_loop_does_not_stop_claiming(spawn_worker, runs):
    # --skip-checks: a system check may refuse this setting; the loop must survive it anyway.
    worker = spawn_worker("--skip-checks", env=SETTINGS)
    wait_until(lambda: "RETENTION" in worker.output(), message="a failed prune")
    for n in range(3):
        wd.enqueue(f"job-{n}", queue=f"q{n}", lane="t-record", payload={"result": n})
    wait_until(
        lambda: all(wd.get_job(f"job-{n}").state == "settled" for n in range(3)),
        message="every job to settle",
    )
    assert [wd.get_job(f"job-{n}").result for n in range(3)] == [0, 1, 2]
    assert "event=housekeeping_failed step=retention" in worker.output()
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
