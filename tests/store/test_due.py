"""Delayed jobs entering their queues' order, and retries pinned at the head (store.due)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.models import Job
from django_watchdog.store.store import Store

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


def test_promotion_across_queues_is_oldest_due_first() -> None:
    """Promoted jobs join as if enqueued at ``run_after``: the earlier due is the older."""
    now = timezone.now()
    wd.enqueue("later", queue="q1", run_after=now + 2 * HOUR)
    wd.enqueue("sooner", queue="q2", run_after=now + HOUR)
    assert Store().promote_due(now=now + 3 * HOUR) == 2
    positions = dict(Job.objects.values_list("job_id", "position"))
    assert positions["sooner"] < positions["later"]
    claimed = Store().claim()
    assert claimed.job is not None and claimed.job.job_id == "sooner"


def test_cancelling_a_delayed_job_that_outranks_the_head_takes_the_head_and_its_ready_flag() -> (
    None
):
    """Cancelled, a delayed job joins at its enqueue place, ahead of a later head."""
    now = timezone.now()
    wd.enqueue("delayed", queue="q", run_after=now + HOUR)
    wd.enqueue("later", queue="q")
    assert Job.objects.get(job_id="later").ready
    assert wd.cancel("delayed").status == "recorded"
    head = wd.queue_head("q")
    assert (head.job_id, head.cancellation_requested) == ("delayed", True)
    ready = set(Job.objects.filter(ready=True).values_list("job_id", flat=True))
    assert ready == {"delayed"}


def _order(queue: str) -> list[str]:
    """The queue's queued jobs as every dialect orders them (position; ties by id)."""
    jobs = Job.objects.filter(queue=queue, state="queued", delayed=False)
    return list(jobs.order_by("-priority", "position", "id").values_list("job_id", flat=True))


def test_a_job_enqueued_after_a_promotion_joins_behind_every_promoted_job() -> None:
    """Enqueue and promotion draw places from one counter: a promotion of two jobs, then an
    enqueue, keeps that order (on MariaDB the second promoted job once took a place after
    the enqueued one's)."""
    now = timezone.now()
    wd.enqueue("j0", queue="q1")
    assert wd.cancel("j0").status == "recorded"
    wd.enqueue("j1", queue="q1", run_after=now + 24 * HOUR)
    wd.enqueue("j2", queue="q1", run_after=now + 24 * HOUR)
    assert Store().promote_due(now=now + 48 * HOUR) == 2
    wd.enqueue("j3", queue="q1", run_after=now - 24 * HOUR)  # due already: enqueued now
    assert _order("q1") == ["j0", "j1", "j2", "j3"]


def test_a_delayed_job_cancelled_after_promotions_joins_where_it_was_enqueued() -> None:
    """Its place is the one it drew at enqueue: before jobs promoted or enqueued later."""
    now = timezone.now()
    wd.enqueue("first", queue="q", run_after=now + HOUR)
    wd.enqueue("second", queue="q", run_after=now + HOUR)
    wd.enqueue("kept", queue="q", run_after=now + 24 * HOUR)
    assert Store().promote_due(now=now + 2 * HOUR) == 2
    wd.enqueue("last", queue="q")
    assert wd.cancel("kept").status == "recorded"
    assert _order("q") == ["kept", "first", "second", "last"]
