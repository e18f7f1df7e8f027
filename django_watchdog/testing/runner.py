"""Run the jobs a test enqueued, inline, in the test's own transaction and thread.

The runner is a worker without threads: it claims the best ready job of the lanes it
serves through the store's verbs (so queue order, priorities, lanes, cancellations and
``queue_changed`` are the real ones), calls the lane's handler in the calling thread, turns
what it did into a decision (``domain.decisions``, the worker's rules and retry policies)
and settles it with its claim token. Every write joins the caller's transaction, so inside
a ``django.test.TestCase`` the jobs see the test's rows and everything rolls back with it.

It sends ``job_started`` and ``job_finished`` (the sender is the lane's registered handler)
and, with tracing on, makes the run's span as a worker does (``engine.hooks``).

Not modelled inline: timeouts (the handler runs to its end), heartbeats and recovery (no
execution disappears), and cancellations recorded while a handler runs (the flag is read
when the job is claimed).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from asgiref.sync import async_to_sync
from django.db import DatabaseError, DataError, connections, transaction
from django.utils import timezone

from .. import handlers as registry
from ..api import _alias
from ..domain import decisions, validation
from ..domain.errors import InvalidInput, WatchdogError
from ..domain.retries import RetryPolicy
from ..domain.states import Outcome
from ..domain.values import Decision
from ..engine import hooks, tracing
from ..engine.running import RunningJob
from ..twins import async_twin
from .runs import JobRun

if TYPE_CHECKING:
    from ..models import Job
    from ..store.store import Store

#: ``claimed_by`` of the jobs the runner claims (a worker that never registers).
INLINE_WORKER = "inline-test-runner"
#: The "now" that makes every delayed job due (``delayed="now"``).
END_OF_TIME = datetime(9999, 12, 31, tzinfo=UTC)
#: A settle the database refused for its data: stored as a ``failed`` outcome saying so.
UNSTORABLE = (DataError, UnicodeError, RecursionError, OverflowError)

Retries = Literal["now", "wait"]
Delayed = Literal["due", "now"]


class TooManyRuns(AssertionError):
    """``run_jobs`` reached ``max_runs`` with jobs still ready (jobs enqueueing jobs?)."""


def run_jobs(
    *,
    lanes: Iterable[str] | None = None,
    exclude_lanes: Iterable[str] = (),
    retries: Retries = "now",
    delayed: Delayed = "due",
    max_runs: int = 1000,
    raise_errors: bool = False,
    using: str | None = None,
) -> list[JobRun]:
    """Run ready jobs until none is left; one record per run, in the order they ran.

    Serves ``lanes`` (default: every lane with a registered handler) except
    ``exclude_lanes``; jobs of other lanes stay queued. ``retries="now"`` runs a failure
    that its retry policy retries again at once (its backoff skipped); ``"wait"`` leaves it
    queued until its ``retry_at`` (its record says ``retrying``). ``delayed="due"`` runs a
    delayed job once its ``run_after`` has passed; ``"now"`` runs every delayed job now.
    ``raise_errors`` re-raises a handler's exception once its job has settled
    ``failed`` or ``outcome_unknown`` (not while a retry follows). Raises ``TooManyRuns``
    after ``max_runs`` runs if jobs are still ready (the last one claimed stays running).
    """
    served = _served_lanes(lanes, exclude_lanes)
    if retries not in ("now", "wait"):
        raise InvalidInput("retries", f"must be 'now' or 'wait', not {retries!r}")
    if delayed not in ("due", "now"):
        raise InvalidInput("delayed", f"must be 'due' or 'now', not {delayed!r}")
    max_runs = validation.integer(max_runs, "max_runs", minimum=1, maximum=1_000_000)
    raise_errors = validation.flag(raise_errors, "raise_errors")
    if not served:
        return []
    from ..store.store import Partition, Store

    store = Store(_alias(using))
    runs: list[JobRun] = []
    while True:
        store.promote_due(now=timezone.now() if delayed == "due" else END_OF_TIME)
        claim = store.claim(Partition(lanes=served), worker_id=INLINE_WORKER)
        if claim.job is None:
            return runs
        if len(runs) >= max_runs:
            raise TooManyRuns(
                f"run_jobs ran {max_runs} jobs and more are ready (job {claim.job.job_id!r} "
                "was claimed and stays running); raise max_runs, or check for jobs that "
                "enqueue jobs without end"
            )
        if claim.status == "cancelled" or claim.claim_token is None:
            runs.append(JobRun.of(claim.job, ran=False))
            continue
        running = RunningJob(claim.job, claim_token=claim.claim_token, worker_id=INLINE_WORKER)
        hooks.started(running, registry.registered()[running.lane])
        started = time.monotonic()
        decision, error = _decide(running, retries, store.using)
        ran = time.monotonic() - started
        running.error = error
        settled = _settle(store, running, decision)
        hooks.finished(running, settled.outcome or "retrying", ran)
        runs.append(JobRun.of(settled, exception=error))
        if raise_errors and error is not None and settled.outcome in _RAISED:
            raise error


_RAISED = (Outcome.FAILED, Outcome.OUTCOME_UNKNOWN)


#: ``run_jobs`` for async tests, run in the thread that holds the database connection.
arun_jobs = async_twin(run_jobs)


def _served_lanes(lanes: Iterable[str] | None, exclude_lanes: Iterable[str]) -> tuple[str, ...]:
    handled = registry.registered()
    excluded = set(validation.lanes(exclude_lanes, "exclude_lanes"))
    if lanes is None:
        wanted = tuple(sorted(handled))
    else:
        wanted = validation.lanes(lanes, "lanes")
        missing = sorted(set(wanted) - set(handled))
        if missing:
            raise InvalidInput(
                "lanes", f"no handler is registered for {', '.join(map(repr, missing))}"
            )
    return tuple(lane for lane in wanted if lane not in excluded)


def _decide(running: RunningJob, retries: Retries, using: str) -> tuple[Decision, Exception | None]:
    """Call the lane's handler; its decision, and the exception it raised if any."""
    value, error = _run_handler(running, using)
    if error is None:
        return decisions.from_return(value)[0], None
    decision = decisions.after_failure(
        error,
        policy=_retry_policy(running),
        attempts=running.attempts,
        cancel_requested=running.cancel_requested,
        now=timezone.now(),
    )
    if decision.retry_at is not None and retries == "now":
        decision = replace(decision, retry_at=timezone.now())
    return decision, error


def _run_handler(running: RunningJob, using: str) -> tuple[Any, Exception | None]:
    """Run the lane's handler: what it returned, or what it raised.

    A handler's writes stay, as a worker's handler's would. Inside a transaction (a
    ``TestCase``'s) it runs in a savepoint that is rolled back only if it raised a database
    error, which would otherwise leave a PostgreSQL transaction unusable.
    """
    handler = running.handler
    assert handler is not None, "hooks.started names the handler first"
    if not connections[using].in_atomic_block:
        try:
            return _call(handler, running), None
        except Exception as error:  # noqa: BLE001 - every failure is the job's outcome
            return None, error
    try:
        with transaction.atomic(using=using):
            try:
                return _call(handler, running), None
            except DatabaseError:
                raise  # rolls the savepoint back
            except Exception as error:  # noqa: BLE001 - every failure is the job's outcome
                return None, error
    except DatabaseError as error:
        return None, error


def _call(handler: Callable[[Any], Any], running: RunningJob) -> Any:
    """Run ``handler`` with the run's span current; an ``async def`` one (or a returned
    awaitable) runs to its end."""
    with tracing.current(running.span):
        if inspect.iscoroutinefunction(handler):
            return async_to_sync(handler)(running)
        value = handler(running)
        if inspect.isawaitable(value):

            async def finish() -> Any:
                return await value

            return async_to_sync(finish)()
        return value


def _retry_policy(running: RunningJob) -> RetryPolicy | None:
    """The job's own retry policy (from ``enqueue``), else its lane handler's."""
    stored = running.model.retry_policy
    if stored is None:
        return registry.options(running.lane).retry
    try:
        return RetryPolicy.from_json(stored)
    except WatchdogError:
        return None  # the worker, too, runs a job whose stored policy is invalid once


def _settle(store: Store, running: RunningJob, decision: Decision) -> Job:
    """Settle ``running`` with its token; the job as it reads afterwards."""
    from ..models import Job

    try:
        store.settle(running.job_id, running.claim_token, decision)
    except UNSTORABLE as error:
        store.settle(running.job_id, running.claim_token, decisions.unstorable(decision, error))
    return Job.objects.using(store.using).get(job_id=running.job_id)
