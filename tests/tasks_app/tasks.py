"""Task functions the backend tests enqueue; queues "tasks" and "tasks-bulk" (tests/settings.py),
served by the lanes "task:tasks" and "task:tasks-bulk"."""

from typing import Any

from django_watchdog import OutcomeUnknown
from tests.tasks_app.framework import TaskContext, task

LANE = "tasks"
BULK_LANE = "tasks-bulk"


class TaskBoom(Exception):
    """Raised by ``failing``, to check the exception class path survives the round trip."""


@task(queue_name=LANE)
def noop(*args: Any, **kwargs: Any) -> None:
    return None


@task(queue_name=LANE)
def add(a: int, b: int) -> int:
    return a + b


@task(queue_name=LANE)
def echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "kwargs": kwargs}


@task(queue_name=LANE)
async def add_async(a: int, b: int) -> int:
    return a + b


@task(queue_name=LANE)
def failing(message: str) -> None:
    raise TaskBoom(message)


@task(queue_name=LANE)
def unknown_effect() -> None:
    raise OutcomeUnknown("the mail server timed out after sending")


@task(queue_name=LANE)
def returns_tuple() -> tuple[int, int]:
    return (1, 2)


@task(queue_name=LANE)
def returns_object() -> object:
    return object()


@task(queue_name=LANE, takes_context=True)
def context_info(context: TaskContext) -> dict[str, Any]:  # type: ignore[type-arg]
    return {
        "id": context.task_result.id,
        "attempt": context.attempt,
        "status": str(context.task_result.status),
        "worker_ids": context.task_result.worker_ids,
        "cancel_requested": getattr(context, "cancel_requested", None),
    }


@task(queue_name=BULK_LANE, priority=-10)
def bulk(n: int) -> int:
    return n


def plain_function() -> str:
    """Not a task: a payload naming it must never run it."""
    raise AssertionError("a plain function was called from a job payload")


alias_of_add = add


@task(queue_name=LANE)
def update_object(app_label: str, model_name: str, pk: str) -> str:
    """The shape of Wagtail's index tasks: (app_label, model_name, pk)."""
    return f"{app_label}.{model_name}:{pk}"


def odd_key(args: list[Any], kwargs: dict[str, Any]) -> object:
    """A key function that breaks the rule (returns an int) when asked to."""
    return 42 if args and args[0] == "bad" else None


#: Called by ``update_object_with`` while it runs (a test sets it; ``None``: nothing).
DURING_UPDATE: Any = None


@task(queue_name=LANE)
def update_object_with(app_label: str, model_name: str, pk: str) -> Any:
    """An object task that calls ``DURING_UPDATE(pk)`` while it runs and returns its value."""
    return None if DURING_UPDATE is None else DURING_UPDATE(pk)
