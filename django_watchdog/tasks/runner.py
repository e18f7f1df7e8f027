"""The lane handler that runs Django tasks on the watchdog worker."""

from __future__ import annotations

import logging
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from django.db.models import Model, QuerySet
from django.utils import timezone

from . import errors, framework, locks, options
from .framework import (
    TaskContext,
    TaskError,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_finished,
    task_started,
)
from .mapping import TaskCall, started_result, task_as_enqueued

#: True while ``task_finished`` is sent for a failed task whose worker logs its traceback.
_TRACEBACK_LOGGED_BY_WORKER: ContextVar[bool] = ContextVar(
    "django_watchdog_traceback_logged_by_worker", default=False
)


class _OneTraceback(logging.Filter):
    """On the framework's logger: drops a record's traceback while the worker logs it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _TRACEBACK_LOGGED_BY_WORKER.get():
            record.exc_info = None
            record.exc_text = None
        return True


def install_log_filter() -> None:
    """Put the filter on the framework's logger (``framework.NAME``), once."""
    logger = logging.getLogger(framework.NAME)
    if not any(isinstance(f, _OneTraceback) for f in logger.filters):
        logger.addFilter(_OneTraceback())


class JobView(Protocol):
    """What the runner reads from the job view the worker hands to a handler."""

    job_id: str
    lane: str
    priority: int
    payload: Any
    recovery_count: int
    enqueued_at: datetime
    worker_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchdogTaskContext(TaskContext):  # type: ignore[type-arg,misc]
    """Django's ``TaskContext``, plus the running job to check ``cancel_requested``."""

    job: Any = field(default=None, repr=False, compare=False)

    @property
    def cancel_requested(self) -> bool:
        """True once a cancellation was recorded for this job: stop early if you can."""
        return bool(getattr(self.job, "cancel_requested", False))


def run_task(job: JobView) -> Any:
    """Run the Django task a job names; its JSON return value becomes the job's result.

    Only a ``django.tasks.Task`` defined at the payload's module and name is run (see
    ``TaskCall.resolve``). An exception propagates, so the worker settles the job ``failed``.
    """
    call = TaskCall.from_payload(job.payload)
    if call is None:
        raise errors.TaskNotRegistered(
            f"job {job.job_id!r} on lane {job.lane!r} holds no django.tasks call; "
            "this lane's handler runs only Django tasks"
        )
    task = task_as_enqueued(
        call.resolve(), priority=job.priority, lane=job.lane, backend=call.backend
    )
    started_at = getattr(job, "started_at", None) or timezone.now()
    result = started_result(
        task,
        call,
        job_id=job.job_id,
        recovery_count=job.recovery_count,
        worker_id=str(getattr(job, "worker_id", None) or "unknown"),
        enqueued_at=job.enqueued_at,
        started_at=started_at,
    )
    sender = _sender(call.backend)
    task_started.send(sender, task_result=result)
    try:
        with locks.locked(_rows_to_lock(call)):
            if task.takes_context:
                value = task.call(
                    WatchdogTaskContext(task_result=result, job=job), *call.args, **call.kwargs
                )
            else:
                value = task.call(*call.args, **call.kwargs)
        value = normalize_json(value)
    except KeyboardInterrupt:
        raise
    except BaseException as error:
        _finish(result, TaskResultStatus.FAILED, error=error)
        # The framework's receiver logs "Task id=... state=FAILED" with the traceback; under
        # the worker, whose settle line logs it too, that line goes without (one copy).
        token = _TRACEBACK_LOGGED_BY_WORKER.set(bool(getattr(job, "settle_logs_traceback", False)))
        try:
            task_finished.send(sender, task_result=result)
        finally:
            _TRACEBACK_LOGGED_BY_WORKER.reset(token)
        raise
    _finish(result, TaskResultStatus.SUCCESSFUL, value=value)
    task_finished.send(sender, task_result=result)
    return value


def _finish(
    result: TaskResult[..., Any],
    status: TaskResultStatus,
    *,
    value: Any = None,
    error: BaseException | None = None,
) -> None:
    """Update the in-process result for the ``task_finished`` signal's receivers."""
    object.__setattr__(result, "status", status)
    object.__setattr__(result, "finished_at", timezone.now())
    if error is None:
        object.__setattr__(result, "_return_value", value)
        return
    import traceback

    kind = type(error)
    result.errors.append(
        TaskError(
            exception_class_path=f"{kind.__module__}.{kind.__qualname__}",
            traceback="".join(traceback.format_exception(error)),
        )
    )


def _rows_to_lock(call: TaskCall) -> QuerySet[Model] | None:
    """The rows the call's lock function (``OPTIONS["ROW_LOCKS"]``) names, if any."""
    from .framework import InvalidTaskBackend, task_backends

    try:
        backend_options = task_backends[call.backend].options
    except InvalidTaskBackend:
        return None
    found = options.task_function(backend_options, "ROW_LOCKS", call.backend, call.path)
    if found is None:
        return None
    lock_function: locks.LockFunction = found[0]
    return lock_function(list(call.args), dict(call.kwargs))


def _sender(alias: str) -> type[Any]:
    """The class of the backend the task was enqueued through, as Django's signals send."""
    from .backend import WatchdogBackend
    from .framework import InvalidTaskBackend, task_backends

    try:
        return type(task_backends[alias])
    except InvalidTaskBackend:
        return WatchdogBackend
