"""``WatchdogBackend``: Django's task API (``@task``, ``enqueue``, ``get_result``) on watchdog.

Configure it in ``TASKS``; each name in ``QUEUES`` is a watchdog lane whose handler runs
Django tasks. ``OPTIONS``: ``DATABASE`` (alias the jobs live in; default: the router's
choice for ``Job``) and ``MAX_RECOVERIES`` (recovery policy of every task job; default
``None``: a task whose worker is lost ends ``interrupted``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, cast
from uuid import uuid4

from asgiref.sync import sync_to_async
from django.core import checks
from django.db import connections
from django.tasks import Task, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued
from django.utils import timezone

from .. import api, handlers
from ..domain import validation
from ..domain.errors import InvalidInput
from . import errors
from .mapping import (
    TaskCall,
    private_queue,
    result_from_job,
    task_as_enqueued,
    to_watchdog_priority,
)
from .registration import register_lane

KNOWN_OPTIONS = frozenset({"DATABASE", "MAX_RECOVERIES"})


class WatchdogBackend(BaseTaskBackend):
    """Run ``django.tasks`` tasks as watchdog jobs; results come from the job rows."""

    supports_defer = True  # ``run_after`` becomes a delayed job (``enqueue(run_after=...)``)
    supports_async_task = True  # coroutine tasks run to completion in the worker thread
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        for lane in self.queues:
            register_lane(lane)

    @property
    def database(self) -> str | None:
        """The database alias of this backend's jobs (``None``: the router decides)."""
        value: str | None = self.options.get("DATABASE")
        return value

    @property
    def max_recoveries(self) -> int | None:
        value: int | None = self.options.get("MAX_RECOVERIES")
        return value

    def validate_task(self, task: Task[..., Any]) -> None:
        """Django's rules, an aware ``run_after`` and a ``queue_name`` that is a lane name.

        Django checks that ``run_after`` is aware only with ``USE_TZ``; watchdog always
        needs an instant, so a naive (or non-datetime) one is refused with Django's message.
        """
        run_after = task.run_after
        if run_after is not None and (
            not isinstance(run_after, datetime) or timezone.is_naive(run_after)
        ):
            raise InvalidTask("run_after must be an aware datetime.")
        super().validate_task(task)
        try:
            validation.lane(task.queue_name, "queue_name")
        except InvalidInput as error:
            raise InvalidTask(
                f"Queue {task.queue_name!r} is not a watchdog lane: {error}"
            ) from None

    def enqueue[**P, R](
        self, task: Task[P, R], args: list[Any], kwargs: dict[str, Any]
    ) -> TaskResult[P, R]:
        """Enqueue a call of ``task`` as a job in its own queue, joining any open transaction."""
        return self.enqueue_call(task, args, kwargs)

    def enqueue_call[**P, R](
        self,
        task: Task[P, R],
        args: Iterable[Any],
        kwargs: Mapping[str, Any],
        *,
        job_id: str | None = None,
        queue: str | None = None,
    ) -> TaskResult[P, R]:
        """Enqueue a call of ``task``; ``job_id`` makes it idempotent, ``queue`` serial.

        Repeating an identical call with the same ``job_id`` returns the existing job's
        result; a different call under it raises ``JobConflict``.
        """
        self.validate_task(task)
        if job_id is None:
            job_id = str(uuid4())
        job_id = validation.identifier(job_id, "job_id")
        # Normalises args and kwargs to JSON types; raises TypeError as Django's backends do.
        result: TaskResult[P, R] = TaskResult(
            task=task,
            id=job_id,
            status=TaskResultStatus.READY,
            enqueued_at=None,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,  # type: ignore[arg-type]
            kwargs=kwargs,  # type: ignore[arg-type]
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        call = TaskCall.of(task, result)
        enqueued = api.enqueue(
            job_id,
            queue=private_queue(job_id) if queue is None else queue,
            lane=task.queue_name,
            priority=to_watchdog_priority(task.priority),
            payload=call.payload(),
            max_recoveries=self.max_recoveries,
            run_after=task.run_after,
            using=self.database,
        )
        if enqueued.status == "duplicate":
            return cast("TaskResult[P, R]", result_from_job(enqueued.job, task, call))
        object.__setattr__(result, "enqueued_at", enqueued.job.enqueued_at)
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> TaskResult[..., Any]:
        """The task result of job ``result_id``; ``TaskResultDoesNotExist`` if none."""
        try:
            job = api.get_job(result_id, using=self.database)
        except InvalidInput:
            job = None
        if job is None:
            raise TaskResultDoesNotExist(result_id)
        call = TaskCall.from_payload(job.payload)
        if call is None:
            raise TaskResultDoesNotExist(f"{result_id!r} is a watchdog job, not a Django task")
        try:
            registered = call.resolve()
        except errors.TaskNotRegistered as error:
            raise TaskResultDoesNotExist(f"{result_id!r}: {error}") from error
        task = task_as_enqueued(
            registered,
            priority=job.priority,
            lane=job.lane,
            backend=call.backend,
            run_after=job.run_after,
        )
        return result_from_job(job, task, call)

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        from django.apps import apps

        from .runner import run_task

        where = f"TASKS[{self.alias!r}]"
        messages: list[checks.CheckMessage] = []
        if not apps.is_installed("django_watchdog"):
            messages.append(
                checks.Error(
                    f"{where} uses WatchdogBackend but django_watchdog is not installed.",
                    hint="Add 'django_watchdog' to INSTALLED_APPS and run migrate.",
                    id="django_watchdog.E101",
                )
            )
        if not self.queues:
            messages.append(
                checks.Error(
                    f"{where}['QUEUES'] is empty; WatchdogBackend needs the list of its lanes.",
                    hint="Each queue name is a watchdog lane whose handler runs Django tasks; "
                    "a worker only claims lanes that have a handler.",
                    id="django_watchdog.E102",
                )
            )
        owners = handlers.registered()
        for name in sorted(self.queues, key=str):
            try:
                lane = validation.lane(name, "QUEUES")
            except InvalidInput as error:
                messages.append(checks.Error(f"{where}: {error}", id="django_watchdog.E103"))
                continue
            owner = owners.get(lane)
            if owner is not None and owner is not run_task:
                messages.append(
                    checks.Error(
                        f"{where}['QUEUES'] names lane {lane!r}, which already has the "
                        f"handler {owner.__module__}.{owner.__qualname__}.",
                        hint="A lane has one handler: give Django tasks lanes of their own.",
                        id="django_watchdog.E104",
                    )
                )
        messages.extend(self._check_options(where))
        return messages

    def _check_options(self, where: str) -> list[checks.CheckMessage]:
        messages: list[checks.CheckMessage] = []
        if not isinstance(self.options, dict):
            return [checks.Error(f"{where}['OPTIONS'] must be a dict.", id="django_watchdog.E105")]
        for name in sorted(set(self.options) - KNOWN_OPTIONS, key=str):
            messages.append(
                checks.Error(
                    f"{where}['OPTIONS'][{name!r}] is not a WatchdogBackend option.",
                    hint=f"Known options: {', '.join(sorted(KNOWN_OPTIONS))}.",
                    id="django_watchdog.E105",
                )
            )
        database = self.options.get("DATABASE")
        if database is not None and database not in connections:
            messages.append(
                checks.Error(
                    f"{where}['OPTIONS']['DATABASE'] = {database!r} is not in DATABASES.",
                    id="django_watchdog.E106",
                )
            )
        try:
            validation.max_recoveries(self.options.get("MAX_RECOVERIES"))
        except InvalidInput as error:
            messages.append(
                checks.Error(
                    f"{where}['OPTIONS']['MAX_RECOVERIES']: {error.problem} (or None).",
                    id="django_watchdog.E107",
                )
            )
        return messages


def enqueue_task[**P, R](
    task: Task[P, R],
    args: Iterable[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    job_id: str | None = None,
    queue: str | None = None,
) -> TaskResult[P, R]:
    """Enqueue ``task`` with an idempotent ``job_id`` and/or into the serial ``queue``.

    What ``task.enqueue(*args, **kwargs)`` does, plus the two things Django's API cannot
    say. ``task``'s backend must be a ``WatchdogBackend`` (else ``InvalidTask``).
    """
    backend = task.get_backend()
    if not isinstance(backend, WatchdogBackend):
        raise InvalidTask(
            f"Task backend {task.backend!r} is {type(backend).__name__}, not WatchdogBackend."
        )
    return backend.enqueue_call(task, list(args), dict(kwargs or {}), job_id=job_id, queue=queue)


async def aenqueue_task[**P, R](
    task: Task[P, R],
    args: Iterable[Any] = (),
    kwargs: Mapping[str, Any] | None = None,
    *,
    job_id: str | None = None,
    queue: str | None = None,
) -> TaskResult[P, R]:
    """The async twin of ``enqueue_task``: the database work runs in a thread."""
    return await sync_to_async(enqueue_task, thread_sensitive=True)(
        task, args, kwargs, job_id=job_id, queue=queue
    )
