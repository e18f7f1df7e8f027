"""Two worker processes run one per-second schedule at once: each tick is enqueued once."""

import re
import signal
from collections import Counter
from datetime import timedelta

import pytest

from django_watchdog.engine.schedules import tick_of
from django_watchdog.models import Job, ScheduleState

from .conftest import wait_until

pytestmark = [pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]

SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.acceptance.schedule_settings"}
ENQUEUED = re.compile(r"event=schedule_enqueue schedule=every-second job_id=(\S+)")
FIRED = re.compile(r"event=schedule_fire schedule=every-second")


def completed_ticks():
    return Job.objects.filter(queue="schedule:every-second", outcome="completed").count()


def test_two_workers_enqueue_each_tick_of_a_per_second_schedule_once(spawn_worker, runs):
    workers = [spawn_worker("--concurrency", "2", env=SETTINGS) for _ in range(2)]
    wait_until(lambda: completed_ticks() >= 6, timeout=60, message="six ticks run")
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(timeout=60) == 0, worker.output()

    job_ids = list(
        Job.objects.filter(queue="schedule:every-second").values_list("job_id", flat=True)
    )
    ticks = sorted(tick_of(job_id) for job_id in job_ids)
    assert len(ticks) >= 6
    # Every second between the first and the last tick, none twice, none missing.
    assert ticks == [ticks[0] + timedelta(seconds=n) for n in range(len(ticks))]

    logs = [worker.output() for worker in workers]
    enqueued = Counter(job_id for log in logs for job_id in ENQUEUED.findall(log))
    assert set(enqueued) == set(job_ids)
    assert set(enqueued.values()) == {1}, "a tick was enqueued by both workers"
    assert all(len(FIRED.findall(log)) >= 3 for log in logs), "both workers fired the schedule"

    started = Counter(record["job_id"] for record in runs.starts())
    done = set(
        Job.objects.filter(job_id__in=job_ids, state="settled").values_list("job_id", flat=True)
    )
    assert all(started[job_id] == 1 for job_id in done)
    assert ScheduleState.objects.get(name="every-second").last_tick == ticks[-1]
