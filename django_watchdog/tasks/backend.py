"""``WatchdogBackend``: Django's task API (``@task``, ``enqueue``, ``get_result``) on watchdog.

Configure it in ``TASKS``; each name in ``QUEUES`` is served by the watchdog lane
``task:<name>`` (``mapping.lane_of``), whose handler runs Django tasks. ``OPTIONS`` are
listed in ``options``: the database, the recovery policy, the payload cap, serial keys,
coalescing and row locks (applied by the runner, ``runner`` and ``locks``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast
from uuid import uuid4

from asgiref.sync import sync_to_async
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.utils import timezone

from .. import api, handlers
from ..domain import validation
from ..domain.errors import InvalidInput
from ..domain.values import EnqueueResult
from ..tracing import TASK, enqueue_span
from . import errors, framework, options
from .framework import (
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)
from .keys import KeyFunction, key_queue
from .mapping import (
    TaskCall,
    lane_of,
    private_queue,
    result_from_job,
    task_as_enqueued,
    to_watchdog_priority,
)
from .registration import register_lane

if TYPE_CHECKING:
    from ..store.enqueue import NewJob


class WatchdogBackend(BaseTaskBackend):
    """Run ``django.tasks`` tasks as watchdog jobs; results come from the job rows."""

    supports_defer = True  # ``run_after`` becomes a delayed job (``enqueue(run_after=...)``)
    supports_async_task = True  # coroutine tasks run to completion in the worker thread
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        from django.apps import apps

        # Before the apps are ready (a task module imported by another app's ready()),
        # django_watchdog's ready() registers the lanes, after its handler autodiscovery:
        # a lane a project's handler took is then reported (E104), never a start-up crash.
        if apps.ready:
            for name in self.queues:
                register_lane(name)

    @property
    def database(self) -> str | None:
        """The database alias of this backend's jobs (``None``: the router decides)."""
        value: str | None = self.options.get("DATABASE")
        return value

    @property
    def max_recoveries(self) -> int | None:
        value: int | None = self.options.get("MAX_RECOVERIES")
        return value

    @property
    def max_payload_bytes(self) -> tuple[int | None, str]:
        """The payload cap of this backend's tasks and the setting it comes from."""
        value = self.options.get("MAX_PAYLOAD_BYTES")
        if value is None:
            return None, "WATCHDOG['MAX_PAYLOAD_BYTES']"
        return int(value), f"TASKS[{self.alias!r}]['OPTIONS']['MAX_PAYLOAD_BYTES']"

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
            lane_of(task.queue_name)
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
        result; a different call under it raises ``JobConflict``. Without ``queue``, a task
        with a serial key (``OPTIONS["SERIAL_KEYS"]``) goes to its key's queue, and if it is
        coalesced (``OPTIONS["COALESCE"]``) and ``job_id`` was not chosen, an identical call
        still queued there is returned instead of a new job.
        """
        self.validate_task(task)
        chosen_id = job_id is not None
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
        with enqueue_span(**{TASK: call.path}) as span:
            keyed = self._key_queue(call) if queue is None else None
            from ..store.enqueue import NewJob

            cap, cap_name = self.max_payload_bytes
            new = NewJob.parse(
                job_id,
                queue=queue if queue is not None else keyed or private_queue(job_id),
                lane=lane_of(task.queue_name),
                priority=to_watchdog_priority(task.priority),
                payload=call.payload(),
                max_recoveries=self.max_recoveries,
                run_after=task.run_after,
                max_payload_bytes=cap,
                cap_name=cap_name,
                trace_context=span.context,
            )
            coalesce = (
                keyed is not None
                and not chosen_id
                and task.run_after is None
                and call.path in options.coalesced(self.options)
            )
            enqueued = self._enqueue(new, coalesce=coalesce)
            span.enqueued([enqueued])
        if enqueued.status == "duplicate":
            return cast("TaskResult[P, R]", result_from_job(enqueued.job, task, call))
        object.__setattr__(result, "enqueued_at", enqueued.job.enqueued_at)
        task_enqueued.send(type(self), task_result=result)
        return result

    def _key_queue(self, call: TaskCall) -> str | None:
        """The serial queue of ``call``'s key, if its task has a key function and a key."""
        found = options.task_function(self.options, "SERIAL_KEYS", self.alias, call.path)
        if found is None:
            return None
        function: KeyFunction = found[0]
        name, path = found[1], found[2]
        key = function(list(call.args), dict(call.kwargs))
        if key is None:
            return None
        if not isinstance(key, str) or not key:
            raise InvalidInput(name, f"{path} returned {key!r}, not a non-empty str or None")
        return key_queue(call.path, key)

    def _enqueue(self, new: NewJob, *, coalesce: bool) -> EnqueueResult:
        """Enqueue ``new``; if ``coalesce``, an identical queued job stands for it."""
        from ..store.store import Store

        store = Store(self.database)
        if not coalesce:
            return store.enqueue(new)
        # A new uuid job id cannot conflict, so no savepoint is needed to keep the
        # caller's transaction usable; the twin's queue stays locked until it commits.
        with transaction.atomic(using=store.using, savepoint=False):
            twin = store.queued_twin(new)
            if twin is not None:
                return EnqueueResult(status="duplicate", job=twin)
            return store.enqueue(new)

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

        if self._checked_by_the_other_framework():
            return []
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
                    f"{where}['QUEUES'] is empty; WatchdogBackend needs the list of its queues.",
                    hint="Each queue is served by the watchdog lane 'task:<queue>', whose "
                    "handler runs Django tasks; a worker only claims lanes that have a handler.",
                    id="django_watchdog.E102",
                )
            )
        owners = handlers.registered()
        for name in sorted(self.queues, key=str):
            try:
                lane = lane_of(name)
            except InvalidInput as error:
                messages.append(
                    checks.Error(f"{where}['QUEUES']: {error}", id="django_watchdog.E103")
                )
                continue
            owner = owners.get(lane)
            if owner is not None and owner is not run_task:
                messages.append(
                    checks.Error(
                        f"{where}['QUEUES'] names {name!r}, whose lane {lane!r} already has "
                        f"the handler {owner.__module__}.{owner.__qualname__}.",
                        hint="A lane has one handler: register your own handlers on lanes "
                        "that do not start with 'task:'.",
                        id="django_watchdog.E104",
                    )
                )
        messages.extend(options.check(where, self.options))
        return messages

    def _checked_by_the_other_framework(self) -> bool:
        """True for the backport's copy of a backend ``django.tasks`` also checks.

        With both frameworks installed each has its own instance of every backend and
        each runs its checks; only the ``django.tasks`` one reports, so each message
        appears once.
        """
        backport_backends = framework.backport_backends()
        if backport_backends is None:
            return False
        try:
            return bool(backport_backends[self.alias] is self)
        except (ImproperlyConfigured, KeyError):
            return False


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
