"""Extreme inputs through the public API, the worker's options and the settings, against a
real worker process: each is refused naming what was wrong, nothing is written, and the
worker that is running goes on claiming."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from django.db import connection

import django_watchdog as wd
from django_watchdog import InvalidInput
from django_watchdog.models import Job, Worker
from tests.acceptance.conftest import ROOT, wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

WEST = timezone(timedelta(hours=-5))
EAST = timezone(timedelta(hours=5))

#: (call arguments, field the refusal names): values Python holds but a database cannot
#: store, or stores but cannot hand back.
POISON: list[Any] = [
    pytest.param({"run_after": datetime.max.replace(tzinfo=WEST)}, "run_after", id="max-west"),
    pytest.param({"run_after": datetime.min.replace(tzinfo=EAST)}, "run_after", id="min-east"),
    pytest.param({"job_id": "p-\ud800"}, "job_id", id="surrogate-id"),
    pytest.param({"queue": "q-\udfff"}, "queue", id="surrogate-queue"),
    pytest.param({"payload": {"k": "v\udc80"}}, "payload", id="surrogate-payload"),
    pytest.param({"payload": {"k\udc80": 1}}, "payload", id="surrogate-key"),
    pytest.param({"payload": [math.nan]}, "payload", id="nan-payload"),
    pytest.param({"timeout": math.inf}, "timeout", id="inf-timeout"),
]


@pytest.mark.parametrize(("arguments", "field"), POISON)
def test_poison_is_refused_and_the_worker_claims_on(spawn_worker, runs, arguments, field):
    worker = spawn_worker("--concurrency", "1")
    wait_until(Worker.objects.exists, message="the worker to register")
    call = {"job_id": "poison", "queue": "q-poison", "lane": "t-record", **arguments}
    with pytest.raises(InvalidInput) as caught:
        wd.enqueue(call.pop("job_id"), **call)
    assert caught.value.field == field
    with pytest.raises(InvalidInput):
        wd.enqueue_many([{"job_id": "poison-2", "queue": "q-poison", **arguments}])
    assert not Job.objects.exists(), "nothing is written"

    wd.enqueue("after", queue="q-after", lane="t-record")
    wait_until(lambda: runs.ends("after"), message="the worker to run the next job")
    wait_until(lambda: wd.get_job("after").state == "settled", message="the job to settle")
    assert worker.popen.poll() is None, worker.output()


def test_a_lone_surrogate_in_a_fail_lane_reason_is_refused():
    wd.enqueue("kept", queue="q", lane="t-record")
    with pytest.raises(InvalidInput) as caught:
        wd.fail_lane("t-record", "broken \ud800 text")
    assert caught.value.field == "reason"
    assert wd.get_job("kept").state == "queued"


@pytest.mark.parametrize(
    "option",
    [
        ("--poll-interval", "nan"),
        ("--poll-interval", "inf"),
        ("--poll-interval", "1e400"),
        ("--shutdown-grace", "nan"),
        ("--shutdown-grace", "-1"),
    ],
    ids=lambda o: " ".join(o),
)
def test_a_worker_option_it_cannot_run_with_is_refused_at_start(spawn_worker, option):
    """``nan`` spun an idle worker at 66 % CPU, ``inf`` crashed it; now it never starts."""
    wd.enqueue("waiting", queue="q", lane="t-record")
    worker = spawn_worker(*option)
    assert worker.wait(timeout=60) != 0
    assert option[0] in worker.output()
    assert not Worker.objects.exists()
    assert wd.get_job("waiting").state == "queued"


def test_a_retention_no_cut_off_can_reach_stops_the_worker_at_start(spawn_worker):
    """``RETENTION=1e12`` passed ``check``; every loop then failed with OverflowError
    before claiming. Now the system check refuses it, naming the setting."""
    wd.enqueue("waiting", queue="q", lane="t-record")
    worker = spawn_worker(env={"DJANGO_SETTINGS_MODULE": "tests.faults.retention_settings"})
    assert worker.wait(timeout=60) != 0
    assert "django_watchdog.E010" in worker.output()
    assert "WATCHDOG['RETENTION']" in worker.output()
    assert wd.get_job("waiting").state == "queued"


def test_prune_with_an_age_that_overflows_is_a_clean_error():
    """``prune --older-than 1000000d`` printed a traceback."""
    environment = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "WATCHDOG_DB_NAME": str(connection.settings_dict["NAME"]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "django", "watchdog", "prune", "--older-than", "1000000d", "--yes"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=environment,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "--older-than" in done.stderr
