"""How a Django task call becomes a watchdog job, and a job row becomes a ``TaskResult``.

=====================  ==========================================================
Django                 watchdog
=====================  ==========================================================
``TaskResult.id``      ``job_id`` (a uuid4 unless the caller chose one)
``Task.queue_name``    ``lane``: ``task:<queue_name>`` (``lane_of``)
``Task.priority``      ``priority``, unchanged (Django's −100…100 sits inside it)
``Task.run_after``     ``run_after``: a delayed job, outside its queue until due
(none)                 ``queue``: ``task:<job_id>`` (parallel), a serial key's queue
                       (``task-key:...``, see ``keys``) or the one the caller named
task, args, kwargs     ``payload``: backend alias, module, function, args, kwargs
=====================  ==========================================================
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from importlib import import_module
from typing import TYPE_CHECKING, Any

from ..domain import validation
from ..domain.errors import InvalidInput, OutcomeUnknown
from ..domain.states import Outcome, State
from . import errors
from .framework import (
    TASK_MAX_PRIORITY,
    TASK_MIN_PRIORITY,
    InvalidTask,
    InvalidTaskBackend,
    Task,
    TaskError,
    TaskResult,
    TaskResultStatus,
)

if TYPE_CHECKING:
    from ..models import Job

#: The payload's ``kind``: tells a Django task job from other jobs of the same lane.
PAYLOAD_KIND = "django.tasks/1"
#: Prefix of the one-job queue a task gets when the caller names none.
PRIVATE_QUEUE_PREFIX = "task:"
#: Prefix of the lane a task queue runs in: no native handler's lane and not native
#: ``enqueue()``'s default lane ``"default"``, whatever ``QUEUES`` names.
LANE_PREFIX = "task:"
#: Stands in ``worker_ids`` for an attempt whose worker is no longer recorded.
UNKNOWN_WORKER = "unknown"

_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskCall:
    """One call of a task, as the job's payload stores it."""

    backend: str
    module: str
    function: str
    args: list[Any]
    kwargs: dict[str, Any]

    @classmethod
    def of(cls, task: Task[..., Any], result: TaskResult[..., Any]) -> TaskCall:
        """The call ``result`` describes; args and kwargs must be strict JSON."""
        validation.canonical_json(result.args, "args")
        validation.canonical_json(result.kwargs, "kwargs")
        return cls(
            backend=result.backend,
            module=task.func.__module__,
            function=task.func.__qualname__,
            args=result.args,
            kwargs=result.kwargs,
        )

    @classmethod
    def from_payload(cls, payload: object) -> TaskCall | None:
        """The call a job's payload holds, or ``None`` if the job is not a Django task."""
        if not isinstance(payload, dict) or payload.get("kind") != PAYLOAD_KIND:
            return None
        fields = (
            payload.get("backend"),
            payload.get("module"),
            payload.get("function"),
            payload.get("args"),
            payload.get("kwargs"),
        )
        backend, module, function, args, kwargs = fields
        if not (
            isinstance(backend, str)
            and isinstance(module, str)
            and isinstance(function, str)
            and isinstance(args, list)
            and isinstance(kwargs, dict)
        ):
            return None
        return cls(backend=backend, module=module, function=function, args=args, kwargs=kwargs)

    def payload(self) -> dict[str, Any]:
        return {
            "kind": PAYLOAD_KIND,
            "backend": self.backend,
            "module": self.module,
            "function": self.function,
            "args": self.args,
            "kwargs": self.kwargs,
        }

    @property
    def path(self) -> str:
        return f"{self.module}.{self.function}"

    def resolve(self) -> Task[..., Any]:
        """The ``Task`` object the call names: never any other callable.

        Imports ``module`` and reads ``function`` from it; raises ``TaskNotRegistered``
        unless that attribute is a ``django.tasks.Task`` whose function is defined there
        under that name.
        """
        if _DOTTED.fullmatch(self.module) is None or not self.function.isidentifier():
            raise errors.TaskNotRegistered(f"{self.path[:120]!r} is not a task path")
        try:
            module = import_module(self.module)
        except ImportError as error:
            raise errors.TaskNotRegistered(f"{self.path!r}: {error}") from error
        task = getattr(module, self.function, None)
        if not isinstance(task, Task):
            raise errors.TaskNotRegistered(f"{self.path!r} is not a django.tasks Task")
        if task.module_path != self.path:
            raise errors.TaskNotRegistered(
                f"{self.path!r} is an alias of {task.module_path!r}, not a registered Task"
            )
        return task


def private_queue(job_id: str) -> str:
    """The queue of a task whose caller named none: its own, so tasks run in parallel."""
    queue = PRIVATE_QUEUE_PREFIX + job_id
    if len(queue) <= validation.IDENTIFIER_MAX:
        return queue
    return PRIVATE_QUEUE_PREFIX + hashlib.sha256(job_id.encode()).hexdigest()


def lane_of(queue_name: object) -> str:
    """The watchdog lane of the task queue ``queue_name``; ``InvalidInput`` if none can be."""
    if not isinstance(queue_name, str):
        raise InvalidInput("queue_name", f"must be a str, not {type(queue_name).__name__}")
    try:
        return validation.lane(LANE_PREFIX + queue_name, "queue_name")
    except InvalidInput:
        raise InvalidInput(
            "queue_name",
            f"{queue_name[:80]!r} is not a task queue name (1–{validation.LANE_MAX - 5} "
            "letters, digits or _ - . :, served by the lane 'task:<name>')",
        ) from None


def queue_name_of(lane: str) -> str:
    """The task queue a lane serves (a lane without the prefix, e.g. a job enqueued
    natively into it, is shown as it is)."""
    return lane.removeprefix(LANE_PREFIX)


def to_watchdog_priority(priority: int) -> int:
    """Django's priority as watchdog's: the same number (higher runs first in both)."""
    return int(priority)


def to_django_priority(priority: int) -> int:
    """A job's priority as Django's −100…100 (jobs enqueued natively may lie outside)."""
    return max(TASK_MIN_PRIORITY, min(TASK_MAX_PRIORITY, priority))


def task_as_enqueued(
    registered: Task[..., Any],
    *,
    priority: int,
    lane: str,
    backend: str,
    run_after: datetime | None = None,
) -> Task[..., Any]:
    """``registered`` with the priority, lane, backend and delay a job was enqueued with."""
    try:
        return registered.using(
            priority=to_django_priority(priority),
            queue_name=queue_name_of(lane),
            backend=backend,
            run_after=run_after,
        )
    except (InvalidTask, InvalidTaskBackend):
        # The settings changed since enqueue (lane or backend gone): report the task as
        # it is declared rather than refusing to show the result.
        return registered


def worker_ids(job: Job) -> list[str]:
    """One entry per attempt; attempts whose worker was lost show ``UNKNOWN_WORKER``."""
    ids = [UNKNOWN_WORKER] * job.recovery_count
    if job.started_at is not None:
        ids.append(job.claimed_by or UNKNOWN_WORKER)
    return ids


def result_from_job(job: Job, task: Task[..., Any], call: TaskCall) -> TaskResult[..., Any]:
    """The ``TaskResult`` a job row shows now."""
    status = _status(job)
    result: TaskResult[..., Any] = TaskResult(
        task=task,
        id=job.job_id,
        status=status,
        enqueued_at=job.enqueued_at,
        started_at=job.started_at,
        finished_at=job.settled_at,
        last_attempted_at=job.started_at,
        args=call.args,
        kwargs=call.kwargs,
        backend=call.backend,
        errors=errors_of(job),
        worker_ids=worker_ids(job),
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", job.result)
    return result


def _status(job: Job) -> TaskResultStatus:
    if job.state == State.QUEUED:
        return TaskResultStatus.READY
    if job.state == State.RUNNING:
        return TaskResultStatus.RUNNING
    if job.outcome == Outcome.COMPLETED:
        return TaskResultStatus.SUCCESSFUL
    return TaskResultStatus.FAILED


def errors_of(job: Job) -> list[TaskError]:
    """What went wrong, for a job settled with any outcome but ``completed``."""
    if job.state != State.SETTLED or job.outcome == Outcome.COMPLETED:
        return []
    reason = job.failure_reason
    if job.outcome == Outcome.FAILED and job.traceback:
        path = raised_class_path(job.traceback, reason) or _path(errors.TaskFailed)
        return [TaskError(exception_class_path=path, traceback=job.traceback)]
    ending: dict[str | None, tuple[type[BaseException], str]] = {
        Outcome.FAILED: (errors.TaskFailed, f"job failed: {reason}"),
        Outcome.CANCELLED: (errors.TaskCancelled, "job was cancelled"),
        Outcome.INTERRUPTED: (errors.TaskInterrupted, f"job was interrupted: {reason}"),
        Outcome.OUTCOME_UNKNOWN: (OutcomeUnknown, "the task's effect may or may not have happened"),
    }
    exception, message = ending.get(job.outcome, (errors.TaskFailed, f"job {job.outcome}"))
    summary = f"{_path(exception)}: {message}"
    text = f"{job.traceback.rstrip()}\n\n{summary}\n" if job.traceback else f"{summary}\n"
    return [TaskError(exception_class_path=_path(exception), traceback=text)]


def _path(exception: type[BaseException]) -> str:
    return f"{exception.__module__}.{exception.__qualname__}"


def raised_class_path(traceback: str, reason: str | None) -> str | None:
    """The dotted class of the exception a formatted traceback ends with.

    ``traceback.format_exception`` writes ``module.Class: message`` (bare ``Class`` for
    builtins) on the last unindented line; the failure reason starts with the class name,
    which tells that line from notes printed after it.
    """
    name = reason.split(":", 1)[0].strip() if reason else None
    for line in reversed(traceback.splitlines()):
        if not line or line[0].isspace():
            continue
        head = line.split(":", 1)[0].strip()
        if _DOTTED.fullmatch(head) is None:
            continue
        if name is None or head == name or head.endswith("." + name):
            return head if "." in head else f"builtins.{head}"
    return None


def started_result(
    task: Task[..., Any],
    call: TaskCall,
    *,
    job_id: str,
    recovery_count: int,
    worker_id: str,
    enqueued_at: datetime | None,
    started_at: datetime | None,
) -> TaskResult[..., Any]:
    """The ``TaskResult`` of a job its handler is running now."""
    return TaskResult(
        task=task,
        id=job_id,
        status=TaskResultStatus.RUNNING,
        enqueued_at=enqueued_at,
        started_at=started_at,
        finished_at=None,
        last_attempted_at=started_at,
        args=call.args,
        kwargs=call.kwargs,
        backend=call.backend,
        errors=[],
        worker_ids=[UNKNOWN_WORKER] * recovery_count + [worker_id],
    )
