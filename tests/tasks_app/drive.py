"""Run task jobs without the worker engine: claim, call the lane's handler, settle."""

from typing import Any

from django_watchdog import handlers
from django_watchdog.domain import decisions
from django_watchdog.engine.running import RunningJob
from django_watchdog.models import Job
from django_watchdog.store.store import Partition, Store

WORKER = "w-test"


def view(
    job: Job, *, worker_id: str = WORKER, cancel_requested: bool = False, token: str = "t"
) -> RunningJob:
    """The job as a handler sees it: the worker's own view, not a copy of it."""
    running = RunningJob(job, claim_token=token, worker_id=worker_id)
    if cancel_requested:
        running.request_cancel()
    return running


def claim(lane: str = "task:tasks", *, worker_id: str = WORKER) -> tuple[Job, str]:
    claimed = Store().claim(Partition(lanes=[lane]), worker_id=worker_id)
    assert claimed.status == "claimed", claimed
    assert claimed.job is not None and claimed.claim_token is not None
    return claimed.job, claimed.claim_token


def run(job: Job, token: str, **view_options: Any) -> Job:
    """Call the lane's registered handler on ``job`` and settle what it decided."""
    handler = handlers.registered()[job.lane]
    try:
        value = handler(view(job, token=token, **view_options))
    except BaseException as error:  # noqa: BLE001 - the worker maps every exception
        decision = decisions.from_exception(error)
    else:
        decision, _ = decisions.from_return(value)
    settled = Store().settle(job.job_id, token, decision)[0]
    assert settled.status == "settled", settled
    assert settled.job is not None
    return settled.job


def run_next(lane: str = "task:tasks", **view_options: Any) -> Job:
    job, token = claim(lane)
    return run(job, token, **view_options)
