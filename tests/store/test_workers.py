"""Worker rows on the database's clock: registration, heartbeats, reaping, and which claims
recovery finds (SPEC §4.8, §9.15)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.models import Worker
from django_watchdog.store import recovery, workers

from .helpers import claimed

pytestmark = pytest.mark.django_db

TIMEOUT = 30.0


def _register(worker_id: str) -> None:
    workers.register(
        connection.alias,
        worker_id,
        started_at=timezone.now() - timedelta(minutes=5),
        lanes=(),
        exclude_lanes=(),
        concurrency=1,
    )


def _silence(worker_id: str, seconds: float) -> None:
    """Make ``worker_id``'s last heartbeat ``seconds`` old (the test database's clock is this
    host's)."""
    Worker.objects.filter(worker_id=worker_id).update(
        heartbeat_at=timezone.now() - timedelta(seconds=seconds)
    )


def _disappeared(**judged: tuple[str, ...]) -> list[str]:
    found = recovery.disappeared_claims(connection.alias, timeout=TIMEOUT, **judged)
    return sorted(job_id for job_id, _ in found)


def test_a_host_clock_an_hour_behind_does_not_make_a_fresh_heartbeat_old(monkeypatch) -> None:
    """Heartbeats are stamped and judged on the database's clock, never a worker's."""
    _register("w")
    wd.enqueue("a", queue="q")
    claimed(worker_id="w")
    skewed = timezone.now() - timedelta(hours=1)
    monkeypatch.setattr(timezone, "now", lambda: skewed)
    _silence("w", 3600)
    assert _disappeared() == ["a"]
    assert workers.heartbeat(connection.alias, "w") is True
    assert _disappeared() == [], "the heartbeat is fresh on the database's clock"
    assert Worker.objects.get(worker_id="w").heartbeat_at > skewed + timedelta(minutes=59)


def test_registering_again_refreshes_the_heartbeat_and_keeps_the_process_start() -> None:
    _register("w")
    started = Worker.objects.get(worker_id="w").started_at
    _silence("w", 3600)
    workers.register(
        connection.alias,
        "w",
        started_at=timezone.now(),
        lanes=("l",),
        exclude_lanes=(),
        concurrency=2,
    )
    row = Worker.objects.get(worker_id="w")
    assert (row.started_at, row.lanes, row.concurrency) == (started, ["l"], 2)
    assert timezone.now() - row.heartbeat_at < timedelta(minutes=1)


def test_a_heartbeat_without_a_row_reports_it_gone() -> None:
    assert workers.heartbeat(connection.alias, "nobody") is False


def test_the_live_and_dead_verdicts_of_processes_override_heartbeats() -> None:
    for worker_id in ("fresh", "silent"):
        _register(worker_id)
    _silence("silent", TIMEOUT + 1)
    wd.enqueue("f", queue="q1")
    wd.enqueue("s", queue="q2")
    claimed(worker_id="fresh")
    claimed(worker_id="silent")
    assert _disappeared() == ["s"]
    assert _disappeared(alive_workers=("silent",)) == []
    assert _disappeared(dead_workers=("fresh",)) == ["f", "s"]
    assert sorted(j for j, _ in recovery.claims_of(connection.alias, ["fresh"])) == ["f"]
    assert recovery.claims_of(connection.alias, []) == []


def test_reap_deletes_rows_silent_for_ten_timeouts_that_run_nothing() -> None:
    for worker_id in ("recent", "idle-gone", "busy-gone"):
        _register(worker_id)
    _silence("recent", 9 * TIMEOUT)
    _silence("idle-gone", 10 * TIMEOUT + 1)
    _silence("busy-gone", 10 * TIMEOUT + 1)
    wd.enqueue("b", queue="q")
    claimed(worker_id="busy-gone")
    assert workers.reap(connection.alias, timeout=TIMEOUT) == 1
    assert sorted(Worker.objects.values_list("worker_id", flat=True)) == ["busy-gone", "recent"]
