"""``async def`` handlers, run by the worker in an event loop of the job's thread: their
return value, exceptions and retries, and cancellation by timeout or intent."""

import asyncio
import threading

from django_watchdog import RetryPolicy
from django_watchdog.domain.states import Outcome
from django_watchdog.handlers import HandlerOptions

from .test_engine import FakeStore, fake_job, make_worker
from .test_engine_deadlines import TIMEOUT, threaded_worker
from .test_engine_faults import wait_for


async def echo(job):
    await asyncio.sleep(0)
    return {"echo": job.payload, "thread": threading.current_thread().name}


def test_an_async_handler_returns_its_value_as_the_result():
    store = FakeStore([fake_job("a", payload="x")])
    make_worker(store, {"l": echo}).run_once()
    assert store.settled["a"].outcome == Outcome.COMPLETED
    assert store.settled["a"].result == {"echo": "x", "thread": "MainThread"}


def test_an_async_handler_that_raises_fails_or_is_retried_by_its_policy():
    async def handle(job):
        await asyncio.sleep(0)
        raise ConnectionError("no route")

    store = FakeStore([fake_job("a")])
    make_worker(store, {"l": handle}).run_once()
    assert store.settled["a"].outcome == Outcome.FAILED
    assert store.settled["a"].failure_reason == "ConnectionError: no route"
    assert "Traceback" in store.settled["a"].traceback
    store = FakeStore([fake_job("b")])
    retry = {"l": HandlerOptions(retry=RetryPolicy(max_attempts=3, backoff=1, jitter=0))}
    make_worker(store, {"l": handle}, lane_options=retry).run_once()
    assert store.settled["b"].retry_at is not None, "sent back to wait for its retry"


def _cancelled(on_cancel, *, timeout, cancel):
    """Run an async handler awaiting a long sleep until ``cancel(worker, store)`` has the
    worker cancel it: the decision it settles with. ``on_cancel`` runs in the handler when
    its task is cancelled (re-raise, or return a value)."""
    started = threading.Event()

    async def handle(job):
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return on_cancel()

    store = FakeStore([fake_job("a")])
    worker = threaded_worker(store, handle, timeout=timeout)
    worker.run_once()
    wait_for(started.is_set, message="a to start")
    cancel(worker, store)
    wait_for(lambda: "a" in store.settled, message="a to settle")
    return store.settled["a"]


def _past_the_deadline(worker, store):
    worker.clock.advance(TIMEOUT + 0.01)
    worker.enforce_timeouts()


def _by_intent(worker, store):
    store.cancelled.add("a")
    worker.beat()  # what the heartbeat thread does every period


def test_an_async_handler_past_its_timeout_is_cancelled_and_fails_for_it():
    reached = []

    def reraise():
        reached.append("cancelled")
        raise asyncio.CancelledError

    settled = _cancelled(reraise, timeout=TIMEOUT, cancel=_past_the_deadline)
    assert reached == ["cancelled"]
    assert settled.outcome == Outcome.FAILED
    assert settled.failure_reason == "TimeoutError: stopped after its 1.0 s timeout"


def test_a_cancellation_intent_cancels_a_running_async_handler():
    def reraise():
        raise asyncio.CancelledError

    assert _cancelled(reraise, timeout=None, cancel=_by_intent).outcome == Outcome.CANCELLED


def test_an_async_handler_that_catches_the_cancellation_and_returns_completes_late():
    # The store turns any outcome into cancelled when an intent was recorded (SPEC §4.5).
    settled = _cancelled(lambda: "cleaned up", timeout=None, cancel=_by_intent)
    assert settled.result == "cleaned up"
