"""Queue heads (SPEC §5 ``queue_head``): idle, the next queued job, or the running one."""

from __future__ import annotations

import pytest

import django_watchdog as wd
from django_watchdog import QueueHead
from django_watchdog.store.store import Store

from .helpers import DONE, claimed

pytestmark = pytest.mark.django_db


def test_unknown_queue_is_idle() -> None:
    assert wd.queue_head("nobody") == QueueHead(state="idle")


def test_head_follows_the_queue_through_its_life() -> None:
    wd.enqueue("a", queue="q")
    wd.enqueue("b", queue="q", priority=2)
    assert wd.queue_head("q") == QueueHead(state="queued", job_id="b")
    token = claimed().claim_token or ""
    assert wd.queue_head("q") == QueueHead(state="running", job_id="b")
    wd.cancel("b")
    assert wd.queue_head("q") == QueueHead(state="running", job_id="b", cancellation_requested=True)
    Store().settle("b", token, DONE)
    assert wd.queue_head("q") == QueueHead(state="queued", job_id="a")
    wd.cancel("a")
    assert wd.queue_head("q") == QueueHead(state="queued", job_id="a", cancellation_requested=True)
    assert Store().claim().status == "cancelled"
    assert wd.queue_head("q") == QueueHead(state="idle")


def test_cancelled_lower_job_does_not_become_the_head() -> None:
    wd.enqueue("a", queue="q", priority=1)
    wd.enqueue("b", queue="q")
    wd.cancel("b")
    assert wd.queue_head("q") == QueueHead(state="queued", job_id="a")


def test_head_is_per_queue() -> None:
    wd.enqueue("a", queue="q1")
    wd.enqueue("b", queue="q2")
    claimed()
    assert wd.queue_head("q1").state == "running"
    assert wd.queue_head("q2") == QueueHead(state="queued", job_id="b")


def test_the_heads_of_many_queues_read_at_once_are_each_queues_own() -> None:
    wd.enqueue("run", queue="busy")
    wd.enqueue("after", queue="busy")
    assert Store().claim().status == "claimed"
    wd.enqueue("low", queue="waiting", priority=1)
    wd.enqueue("high", queue="waiting", priority=5)
    wd.cancel("high")
    names = ["busy", "waiting", "empty", "busy"]
    assert Store("default").queue_heads(names) == {
        name: Store("default").queue_head(name) for name in names
    }
    assert Store("default").queue_heads([]) == {}


def test_a_job_enqueued_into_a_queue_that_exists_is_ready_only_if_it_is_the_head() -> None:
    """Whatever way a database decides it (a refresh of the queue's heads after the insert,
    or the rule in the insert itself): not behind a running job, one waiting to retry, or
    a queued one at least as high; ready in a queue that ran dry; a head it outranks
    demoted; a delayed job never."""
    from dataclasses import replace
    from datetime import timedelta

    from django.utils import timezone

    from django_watchdog.domain.values import Decision
    from django_watchdog.models import Job

    later = timezone.now() + timedelta(hours=1)
    wd.enqueue("run", queue="running")
    assert claimed().job.job_id == "run"  # type: ignore[union-attr]
    wd.enqueue("again", queue="retrying")
    retried = claimed()
    assert retried.job is not None and retried.job.job_id == "again"
    waiting = replace(Decision.failed("not yet"), retry_at=later)
    Store().settle("again", retried.claim_token or "", waiting)
    wd.enqueue("done", queue="dry")
    drained = claimed()
    Store().settle("done", drained.claim_token or "", DONE)
    wd.enqueue("old", queue="queued", priority=1)

    assert wd.enqueue("behind-running", queue="running", priority=9).job.ready is False
    assert wd.enqueue("behind-retry", queue="retrying", priority=9).job.ready is False
    assert wd.enqueue("same", queue="queued", priority=1).job.ready is False
    assert wd.enqueue("delayed", queue="queued", priority=9, run_after=later).job.ready is False
    assert wd.enqueue("urgent", queue="queued", priority=2).job.ready is True
    assert wd.enqueue("next", queue="dry").job.ready is True

    ready = set(Job.objects.filter(ready=True).values_list("job_id", flat=True))
    assert ready == {"again", "urgent", "next"}  # a job waiting to retry keeps its place
    assert wd.queue_head("queued").job_id == "urgent"
    assert wd.queue_head("retrying").job_id == "again"
