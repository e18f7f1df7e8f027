"""Schedules against the database: state row, idempotent ticks, conflicts, concurrent workers."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

import django_watchdog as wd
from django_watchdog import schedules
from django_watchdog.engine.housekeeping import Housekeeping
from django_watchdog.engine.schedules import Schedule, database_fire, tick_of
from django_watchdog.engine.worker import WatchdogWorker, WorkerOptions
from django_watchdog.models import Job, ScheduleState
from django_watchdog.store.worker_store import WorkerStore

pytestmark = pytest.mark.django_db(transaction=True)

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds):
    return T0 + timedelta(seconds=seconds)


def schedule_jobs():
    return sorted(
        Job.objects.filter(job_id__startswith="schedule:").values_list("job_id", flat=True)
    )


def test_first_fire_records_state_then_each_tick_is_enqueued_once():
    schedule = Schedule.parse(
        "report", cron="* * * * *", lane="reports", priority=3, payload={"kind": "minutely"}
    )
    fire = database_fire(WorkerStore("default"))
    first = fire(schedule, at(10))
    assert first.enqueued == () and first.handled_until == at(10)
    state = ScheduleState.objects.get(name="report")
    assert (state.handled_until, state.last_tick) == (at(10), None)

    second = fire(schedule, at(61))
    assert second.enqueued == (schedule.job_id(at(60)),)
    job = Job.objects.get(job_id=schedule.job_id(at(60)))
    assert (job.queue, job.lane, job.priority, job.payload) == (
        "schedule:report",
        "reports",
        3,
        {"kind": "minutely"},
    )
    assert tick_of(job.job_id) == at(60)
    assert fire(schedule, at(62)).enqueued == ()
    state.refresh_from_db()
    assert (state.handled_until, state.last_tick) == (at(62), at(60))


def test_a_tick_already_enqueued_is_a_duplicate_and_a_differing_job_a_conflict():
    schedule = Schedule.parse("report", cron="* * * * *", missed="all")
    fire = database_fire(WorkerStore("default"))
    fire(schedule, at(1))
    wd.enqueue(schedule.job_id(at(60)), queue="schedule:report")  # same fields: duplicate
    wd.enqueue(schedule.job_id(at(120)), queue="elsewhere")  # other fields: conflict
    fired = fire(schedule, at(185))
    assert fired.duplicates == (schedule.job_id(at(60)),)
    assert fired.conflicts == (schedule.job_id(at(120)),)
    assert fired.enqueued == (schedule.job_id(at(180)),)
    assert ScheduleState.objects.get(name="report").handled_until == at(185)


def test_state_survives_restart_and_missed_policy_applies():
    schedule = Schedule.parse("report", cron="* * * * *", missed="latest")
    database_fire(WorkerStore("default"))(schedule, at(1))
    # Every worker down for an hour; a new one (fresh Scheduler, same database) starts.
    fired = database_fire(WorkerStore("default"))(schedule, at(3605))
    assert fired.enqueued == (schedule.job_id(at(3600)),)


@pytest.mark.concurrent_writers
def test_concurrent_workers_enqueue_each_tick_once():
    schedule = Schedule.parse("tick", cron="* * * * * *", missed="all")
    database_fire(WorkerStore("default"))(schedule, at(0.5))
    results, errors = [], []
    barrier = threading.Barrier(4)

    def worker():
        try:
            barrier.wait()
            for step in range(1, 9):
                results.append(database_fire(WorkerStore("default"))(schedule, at(step + 0.5)))
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    enqueued = [job_id for fired in results for job_id in fired.enqueued]
    assert sorted(enqueued) == [schedule.job_id(at(s)) for s in range(1, 9)]
    assert schedule_jobs() == sorted(enqueued)


class Clock:
    def __init__(self, start):
        self.wall, self.mono = start, 0.0

    def now(self):
        return self.wall

    def monotonic(self):
        return self.mono


@pytest.fixture
def registered_schedule():
    saved = schedules.registered()
    yield schedules.schedule("every-minute", cron="* * * * *", lane="reports")
    schedules._registry.clear()
    schedules._registry.update(saved)


def test_the_worker_enqueues_due_ticks_from_its_main_loop(registered_schedule):
    clock = Clock(at(30))
    worker = WatchdogWorker(
        WorkerOptions(worker_id="w-1"),
        handlers={"other": lambda job: None},
        clock=clock,
        housekeeping=Housekeeping(WorkerStore("default"), clock, schedules=schedules.configured()),
    )
    worker.start(threads=False)
    worker.run_once()
    clock.wall = at(61)
    worker.run_once()
    clock.wall = at(121)
    worker.run_once()
    assert schedule_jobs() == [registered_schedule.job_id(at(s)) for s in (60, 120)]
    worker.shutdown()
