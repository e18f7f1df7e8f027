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
