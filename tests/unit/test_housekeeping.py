"""Housekeeping is given its store (typed as ``HousekeepingStore``): retention and schedules
reach the database through it alone, so a fake store drives it with no database."""

import inspect
from datetime import timedelta

from django.test import override_settings

from django_watchdog.engine.housekeeping import (
    PRUNE_BATCHES_PER_PASS,
    PRUNE_INTERVAL,
    STATISTICS_INTERVAL,
    Housekeeping,
)
from django_watchdog.engine.ports import HousekeepingStore
from django_watchdog.engine.schedules import Schedule
from django_watchdog.store.statistics import Analyzed
from django_watchdog.store.worker_store import LockBusy, WorkerStore

from .test_schedules import T0, FakeClock

DAY = timedelta(days=1)


class FakeHousekeepingStore(HousekeepingStore):
    """Records each call; ``busy`` makes the next prune find a lock held elsewhere;
    ``looks`` are what each look for tables without statistics finds, in turn (then
    nothing)."""

    def __init__(self):
        self.calls = []
        self.busy = False
        self.looks = []
        self.looked = []  # each look's ``skip``

    def fire_schedule(self, name, *, now, due, new_job):
        ticks = due(now - timedelta(minutes=1))
        self.calls.append(("fire_schedule", name, [new_job(tick).job_id for tick in ticks]))
        return [(new_job(tick).job_id, "queued") for tick in ticks], now

    def prune(self, *, older_than, now, max_batches=None):
        if self.busy:
            self.busy = False
            raise LockBusy("the feed clock is held elsewhere")
        self.calls.append(("prune", older_than, now, max_batches))
        return 3

    def forget_idle_task_queues(self):
        self.calls.append(("forget_idle_task_queues",))
        return 1

    def analyze_unanalyzed(self, *, skip=()):
        self.looked.append(tuple(sorted(skip)))
        return self.looks.pop(0) if self.looks else Analyzed()


def test_the_worker_store_has_every_method_of_the_housekeeping_protocol():
    names = [
        name
        for name, value in vars(HousekeepingStore).items()
        if inspect.isfunction(value) and not name.startswith("_")
    ]
    assert sorted(names) == [
        "analyze_unanalyzed",
        "fire_schedule",
        "forget_idle_task_queues",
        "prune",
    ]
    for name in names:
        wanted = inspect.signature(getattr(HousekeepingStore, name))
        given = inspect.signature(getattr(WorkerStore, name))
        for parameter in wanted.parameters.values():
            assert given.parameters[parameter.name].kind == parameter.kind, (name, parameter)
            assert given.parameters[parameter.name].default == parameter.default, (name, parameter)


@override_settings(WATCHDOG={"RETENTION": 2 * 86400})
def test_retention_prunes_and_forgets_idle_task_queues_through_the_store():
    store, clock = FakeHousekeepingStore(), FakeClock()
    Housekeeping(store, clock).run_due()
    assert store.calls == [
        ("prune", 2 * DAY, T0, PRUNE_BATCHES_PER_PASS),
        ("forget_idle_task_queues",),
    ]


@override_settings(WATCHDOG={"RETENTION": 2 * 86400})
def test_a_prune_that_meets_a_held_lock_is_deferred_to_the_next_interval():
    store, clock = FakeHousekeepingStore(), FakeClock()
    housekeeping = Housekeeping(store, clock)
    store.busy = True
    housekeeping.run_due()
    assert store.calls == []
    clock.advance(PRUNE_INTERVAL - 1)
    housekeeping.run_due()
    assert store.calls == []
    clock.advance(1)
    housekeeping.run_due()
    assert [call[0] for call in store.calls] == ["prune", "forget_idle_task_queues"]


def test_due_schedules_are_fired_through_the_store():
    store, clock = FakeHousekeepingStore(), FakeClock(start=T0 + timedelta(seconds=30))
    schedule = Schedule.parse("report", cron="* * * * *")
    Housekeeping(store, clock, schedules={"report": schedule}).run_due()
    assert store.calls == [("fire_schedule", "report", [schedule.job_id(T0)])]


def test_tables_without_statistics_are_looked_for_until_none_waits(caplog):
    store, clock = FakeHousekeepingStore(), FakeClock()
    store.looks = [
        Analyzed(waiting=("watchdog_job", "watchdog_queue")),
        Analyzed(analyzed=("watchdog_job",), waiting=("watchdog_queue",)),
        Analyzed(analyzed=("watchdog_queue",)),
    ]
    housekeeping = Housekeeping(store, clock)
    housekeeping.run_due()
    housekeeping.run_due()
    assert len(store.looked) == 1  # not again before the interval
    for _ in range(4):
        clock.advance(STATISTICS_INTERVAL)
        housekeeping.run_due()
    assert len(store.looked) == 3  # none waits after the third: no more looks
    analyzed = [r.getMessage() for r in caplog.records if "tables_analyzed" in r.getMessage()]
    assert len(analyzed) == 2
    assert "tables=watchdog_job " in analyzed[0] and "autovacuum" in analyzed[0]


def test_a_table_this_role_may_not_analyze_is_said_once_and_skipped(caplog):
    store, clock = FakeHousekeepingStore(), FakeClock()
    store.looks = [
        Analyzed(refused=("watchdog_job",), waiting=("watchdog_queue",)),
        Analyzed(analyzed=("watchdog_queue",)),
    ]
    housekeeping = Housekeeping(store, clock)
    housekeeping.run_due()
    clock.advance(STATISTICS_INTERVAL)
    housekeeping.run_due()
    clock.advance(STATISTICS_INTERVAL)
    housekeeping.run_due()
    assert store.looked == [(), ("watchdog_job",)]
    refused = [r.getMessage() for r in caplog.records if "analyze_refused" in r.getMessage()]
    assert len(refused) == 1 and "tables=watchdog_job " in refused[0]
