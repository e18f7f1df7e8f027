"""Retention: prune old settled jobs in batches, never ahead of the settled feed's horizon."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.domain.values import Decision
from django_watchdog.engine.housekeeping import Housekeeping, retention
from django_watchdog.models import Job
from django_watchdog.store.retention import prune, prune_batches

pytestmark = pytest.mark.django_db(transaction=True)

DAY = timedelta(days=1)


def run(job_id, queue=None, *, days_ago=0.0, decision=None):
    """Enqueue and settle ``job_id`` as if it settled ``days_ago`` days ago."""
    wd.enqueue(job_id, queue=queue or job_id)
    claimed = Job.objects.claim(lanes=("default",))
    assert claimed.job.job_id == job_id
    Job.objects.settle(job_id, claimed.claim_token, decision or Decision.completed())
    Job.objects.filter(job_id=job_id).update(settled_at=timezone.now() - days_ago * DAY)


def remaining():
    return sorted(Job.objects.values_list("job_id", flat=True))


def test_prunes_only_settled_jobs_older_than_the_age():
    run("old-1", days_ago=10)
    run("old-2", days_ago=8, decision=Decision.failed("ValueError: x"))
    run("recent", days_ago=1)
    wd.enqueue("queued-later", queue="other")
    assert prune("default", older_than=7 * DAY, now=timezone.now()) == 2
    assert remaining() == ["queued-later", "recent"]


def test_never_prunes_past_the_first_pending_job_of_the_feed():
    wd.enqueue("blocker", queue="slow", lane="slow")  # pending, and first in the feed
    run("behind", days_ago=30)
    assert prune("default", older_than=DAY, now=timezone.now()) == 0
    assert "behind" in remaining()
    # The feed would not hand "behind" out either, until "blocker" settles.
    assert wd.settled_jobs() == []
    claimed = Job.objects.claim(lanes=("slow",))
    Job.objects.settle("blocker", claimed.claim_token, Decision.completed())
    assert prune("default", older_than=DAY, now=timezone.now()) == 1
    assert remaining() == ["blocker"]


def test_deletes_in_batches_of_the_given_size():
    for n in range(7):
        run(f"job-{n}", days_ago=5)
    batches = list(prune_batches("default", older_than=DAY, now=timezone.now(), batch_size=3))
    assert batches == [3, 3, 1]
    assert remaining() == []


def test_max_batches_bounds_one_pass():
    for n in range(5):
        run(f"job-{n}", days_ago=5)
    assert prune("default", older_than=DAY, now=timezone.now(), batch_size=2, max_batches=2) == 4
    assert remaining() == ["job-4"]


def test_a_feed_reader_keeps_its_place_across_a_prune():
    run("a", days_ago=5)
    run("b", days_ago=5)
    first = wd.settled_jobs(limit=1)
    assert [r.job.job_id for r in first] == ["a"]
    run("c", days_ago=0)
    assert prune("default", older_than=DAY, now=timezone.now()) == 2
    assert [r.job.job_id for r in wd.settled_jobs(after=first[0].cursor)] == ["c"]


def test_retention_setting_accepts_seconds_and_timedelta():
    with override_settings(WATCHDOG={"RETENTION": 3600}):
        assert retention() == timedelta(hours=1)
    with override_settings(WATCHDOG={"RETENTION": timedelta(days=2)}):
        assert retention() == 2 * DAY
    with override_settings(WATCHDOG={}):
        assert retention() is None


class Clock:
    def __init__(self):
        self.mono = 0.0

    def now(self):
        return timezone.now()

    def monotonic(self):
        return self.mono


def test_workers_prune_periodically_when_retention_is_set():
    run("old", days_ago=3)
    clock = Clock()
    with override_settings(WATCHDOG={"RETENTION": 2 * 86400}):
        housekeeping = Housekeeping("default", clock, schedules={})
        housekeeping.run_due()
        assert remaining() == []
        run("old-too", days_ago=3)
        clock.mono += 30
        housekeeping.run_due()  # within the prune interval: not yet
        assert remaining() == ["old-too"]
        clock.mono += 31
        housekeeping.run_due()
        assert remaining() == []
    run("kept", days_ago=3)
    clock.mono += 120
    housekeeping.run_due()  # RETENTION unset: keep forever
    assert remaining() == ["kept"]
