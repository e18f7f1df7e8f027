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
