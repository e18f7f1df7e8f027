"""Periodic schedules without a database: due ticks, missed-tick policies, the Scheduler."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_watchdog import schedules
from django_watchdog.domain.errors import InvalidInput
from django_watchdog.engine.housekeeping import Housekeeping
from django_watchdog.engine.schedules import MISSED_LIMIT, Fired, Schedule, Scheduler, tick_of
from django_watchdog.store.worker_store import WorkerStore

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def every_minute(**options) -> Schedule:
    return Schedule.parse("report", cron="* * * * *", **options)


class FakeClock:
    def __init__(self, start=T0):
        self.wall = start
        self.mono = 0.0

    def now(self):
        return self.wall

    def monotonic(self):
        return self.mono

    def advance(self, seconds):
        self.wall += timedelta(seconds=seconds)
        self.mono += seconds


class FakeFire:
    """The store's part in memory: handled_until per schedule and a set of job ids."""

    def __init__(self):
        self.handled: dict[str, datetime] = {}
        self.jobs: list[str] = []
        self.calls = 0

    def __call__(self, schedule, now):
        self.calls += 1
        handled = self.handled.setdefault(schedule.name, now)
        enqueued, duplicates = [], []
        for tick in schedule.due(now, handled):
            job_id = schedule.job_id(tick)
            (duplicates if job_id in self.jobs else enqueued).append(job_id)
            if job_id not in self.jobs:
                self.jobs.append(job_id)
        self.handled[schedule.name] = max(handled, now)
        return Fired(
            schedule=schedule.name,
            enqueued=tuple(enqueued),
            duplicates=tuple(duplicates),
            handled_until=self.handled[schedule.name],
        )


# -- parsing ------------------------------------------------------------------------------


def test_parse_defaults():
    schedule = every_minute()
    assert schedule.queue == "schedule:report"
    assert (schedule.lane, schedule.priority, schedule.payload) == ("default", 0, None)
    assert (schedule.missed, schedule.timezone) == ("latest", "UTC")


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "not cron"}, "cron"),
        ({"cron": 5}, "cron"),
        ({"cron": "* * * * *", "missed": "some"}, "missed"),
        ({"cron": "* * * * *", "grace": 0}, "grace"),
        ({"cron": "* * * * *", "grace": True}, "grace"),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "timezone"),
        ({"cron": "* * * * *", "lane": "bad lane"}, "lane"),
        ({"cron": "* * * * *", "priority": 1.5}, "priority"),
        ({"cron": "* * * * *", "payload": float("nan")}, "payload"),
        ({"cron": "* * * * *", "queue": ""}, "queue"),
    ],
)
def test_parse_rejects_bad_options_naming_the_field(options, field):
    with pytest.raises(InvalidInput) as caught:
        Schedule.parse("report", **options)
    assert caught.value.field == field


def test_parse_rejects_bad_and_long_names():
    with pytest.raises(InvalidInput):
        Schedule.parse("", cron="* * * * *")
    with pytest.raises(InvalidInput):
        Schedule.parse("x" * 201, cron="* * * * *")


def test_job_id_names_schedule_and_tick_in_utc_and_round_trips():
    schedule = Schedule.parse("r:eport", cron="0 3 * * *", timezone="Europe/Paris")
    tick = datetime(2026, 12, 1, 3, 0, tzinfo=schedule.zone)
    job_id = schedule.job_id(tick)
    assert job_id == "schedule:r:eport:2026-12-01T02:00:00+00:00"
    assert tick_of(job_id) == tick
    assert tick_of("invoice-42") is None
    assert tick_of("schedule:x:not a time at all, no no no") is None


# -- due ticks ----------------------------------------------------------------------------


def test_first_sight_backfills_nothing():
    assert every_minute().due(at(30), None) == []
    assert every_minute().due(at(30), at(30)) == []


def test_one_tick_due_in_normal_operation():
    assert every_minute().due(at(60.2), at(59.7)) == [at(60)]
    assert every_minute().due(at(59.9), at(59.7)) == []


def test_a_tick_exactly_now_is_due_once():
    schedule = every_minute()
    assert schedule.due(at(60), at(59)) == [at(60)]
    assert schedule.due(at(61), at(60)) == []


def test_missed_latest_enqueues_only_the_most_recent_tick():
    assert every_minute().due(at(3600 + 5), at(0)) == [at(3600)]


def test_missed_all_enqueues_every_tick_oldest_first():
    ticks = every_minute(missed="all").due(at(300 + 5), at(0))
    assert ticks == [at(60), at(120), at(180), at(240), at(300)]


def test_missed_all_is_bounded_to_the_most_recent_ticks():
    ticks = every_minute(missed="all").due(at(86400), at(0))
    assert len(ticks) == MISSED_LIMIT
    assert ticks[-1] == at(86400) and ticks[0] == at(86400 - 60 * (MISSED_LIMIT - 1))


def test_missed_skip_enqueues_the_latest_only_within_grace():
    schedule = every_minute(missed="skip", grace=30)
    assert schedule.due(at(3600 + 5), at(0)) == [at(3600)]  # 5 s late: on time
    assert schedule.due(at(3600 + 45), at(0)) == []  # 45 s late: missed


def test_seconds_field_and_time_zones():
    per_second = Schedule.parse("tick", cron="* * * * * *", missed="all")
    assert per_second.due(at(3.5), at(0.5)) == [at(1), at(2), at(3)]
    paris = Schedule.parse("nightly", cron="0 3 * * *", timezone="Europe/Paris")
    assert paris.next_tick(T0) == datetime(2026, 12, 2, 2, 0, tzinfo=UTC)


# -- Scheduler ------------------------------------------------------------------------------


def test_scheduler_enqueues_each_tick_and_touches_the_store_only_when_due():
    fire = FakeFire()
    scheduler = Scheduler({"report": every_minute()}, fire)
    clock = FakeClock(at(10))
    scheduler.run_due(clock.now())  # first sight: records now, enqueues nothing
    assert fire.calls == 1 and fire.jobs == []
    for _ in range(100):  # 50 s of polling at 0.5 s: no store call before 12:01
        clock.advance(0.49)
        scheduler.run_due(clock.now())
    assert fire.calls == 1
    while clock.now() < at(185):
        clock.advance(0.5)
        scheduler.run_due(clock.now())
    assert fire.jobs == [every_minute().job_id(at(s)) for s in (60, 120, 180)]
    assert fire.calls == 4


def test_two_schedulers_sharing_a_store_enqueue_each_tick_once():
    fire = FakeFire()
    schedule = Schedule.parse("tick", cron="* * * * * *", missed="all")
    first, second = Scheduler({"tick": schedule}, fire), Scheduler({"tick": schedule}, fire)
    clock = FakeClock(at(0.2))
    for _ in range(40):
        first.run_due(clock.now())
        second.run_due(clock.now())
        clock.advance(0.25)
    assert clock.now() == at(10.2)  # the last pass ran at 9.95
    assert fire.jobs == [schedule.job_id(at(s)) for s in range(1, 10)]


def test_downtime_with_each_policy():
    for missed, expected in (
        ("latest", [60, 3600]),
        ("skip", [60]),
        ("all", list(range(60, 3601, 60))),  # 60 ticks: under MISSED_LIMIT
    ):
        fire = FakeFire()
        schedule = every_minute(missed=missed, grace=30)
        clock = FakeClock(at(59))
        Scheduler({"report": schedule}, fire).run_due(clock.now())
        clock.advance(2)
        Scheduler({"report": schedule}, fire).run_due(clock.now())  # 12:01 on time
        clock.advance(3600 - 61 + 40)  # down until 40 s after 13:00
        Scheduler({"report": schedule}, fire).run_due(clock.now())  # a restarted worker
        assert fire.jobs == [schedule.job_id(at(s)) for s in expected], missed


# -- declarations: code and settings ----------------------------------------------------------


@pytest.fixture
def clean_schedules():
    saved = schedules.registered()
    yield
    schedules._registry.clear()
    schedules._registry.update(saved)


def test_code_registration_and_conflicts(clean_schedules):
    declared = schedules.schedule("cleanup", cron="*/5 * * * *", lane="maintenance")
    assert schedules.configured()["cleanup"] == declared
    assert schedules.schedule("cleanup", cron="*/5 * * * *", lane="maintenance") == declared
    with pytest.raises(schedules.ScheduleConflict):
        schedules.schedule("cleanup", cron="*/10 * * * *", lane="maintenance")
    with pytest.raises(ImproperlyConfigured, match="cron"):
        schedules.schedule("broken", cron="every day")


@override_settings(TIME_ZONE="Europe/Paris")
def test_timezone_defaults_to_settings_time_zone(clean_schedules):
    assert schedules.schedule("paris", cron="0 3 * * *").timezone == "Europe/Paris"


def test_settings_schedules_are_loaded_and_problems_named(clean_schedules):
    declared = {
        "ok": {"cron": "0 * * * *", "lane": "reports", "payload": {"kind": "hourly"}},
        "bad-cron": {"cron": "0 25 * * *"},
        "no-cron": {"lane": "x"},
        "typo": {"cron": "* * * * *", "lanes": "x"},
        "not-a-dict": "* * * * *",
    }
    with override_settings(WATCHDOG={"SCHEDULES": declared}):
        loaded, problems = schedules.load()
        assert set(loaded) == {"ok"} and loaded["ok"].payload == {"kind": "hourly"}
        text = "\n".join(problems)
        for name in ("bad-cron", "no-cron", "typo", "not-a-dict"):
            assert f"[{name!r}]" in text
        assert "unknown option 'lanes'" in text
        with pytest.raises(ImproperlyConfigured):
            schedules.configured()


def test_housekeeping_without_schedules_or_retention_never_touches_the_store(clean_schedules):
    def fire(schedule, now):  # pragma: no cover - must not run
        raise AssertionError("no schedule is configured")

    housekeeping = Housekeeping(WorkerStore("default"), FakeClock(), fire=fire)
    housekeeping.run_due()  # no database access: this unit test has none
