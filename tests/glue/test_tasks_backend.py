"""WatchdogBackend as Django's task backends are tested: enqueue, results, options, checks."""

import logging
import math
from datetime import datetime, timedelta

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction
from django.test import override_settings
from django.utils import timezone

import django_watchdog as wd
from django_watchdog import handlers
from django_watchdog.backend import WatchdogBackend, aenqueue_task, enqueue_task
from django_watchdog.models import Job
from django_watchdog.store.store import Partition, Store
from django_watchdog.tasks.mapping import PAYLOAD_KIND, private_queue
from django_watchdog.tasks.runner import run_task
from tests.tasks_app import tasks
from tests.tasks_app.framework import (
    DUMMY_BACKEND,
    NAME,
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    check_tasks,
    default_task_backend,
    task_backends,
)

pytestmark = pytest.mark.django_db


def test_configured_backend_and_flags():
    assert isinstance(task_backends["default"], WatchdogBackend)
    assert default_task_backend.supports_priority
    assert default_task_backend.supports_get_result
    assert default_task_backend.supports_async_task
    assert default_task_backend.supports_defer


def test_lanes_have_the_task_runner_as_handler():
    registered = handlers.registered()
    assert registered["task:tasks"] is run_task
    assert registered["task:tasks-bulk"] is run_task


def test_enqueue_writes_a_queued_job():
    result = tasks.add.enqueue(1, b=2)

    assert result.status == TaskResultStatus.READY
    assert result.task == tasks.add
    assert result.args == [1] and result.kwargs == {"b": 2}
    assert result.backend == "default"
    assert result.enqueued_at is not None
    assert result.started_at is None and result.finished_at is None
    assert result.errors == [] and result.worker_ids == [] and result.attempts == 0
    with pytest.raises(ValueError, match="Task has not finished yet"):
        result.return_value  # noqa: B018

    job = wd.get_job(result.id)
    assert job is not None
    assert job.state == "queued"
    assert job.lane == "task:tasks"
    assert job.queue == private_queue(result.id) == f"task:{result.id}"
    assert job.priority == 0
    assert job.payload == {
        "kind": PAYLOAD_KIND,
        "backend": "default",
        "module": "tests.tasks_app.tasks",
        "function": "add",
        "args": [1],
        "kwargs": {"b": 2},
    }


def test_result_ids_are_uuids_and_unique():
    first, second = tasks.noop.enqueue(), tasks.noop.enqueue()
    assert first.id != second.id
    assert len(first.id) == 36 and first.id.count("-") == 4


def test_get_result_equals_the_enqueued_result():
    result = tasks.echo.enqueue((1, 2), x={"y": [3]})

    assert tasks.echo.get_result(result.id) == result
    assert default_task_backend.get_result(result.id) == result
    assert result.args == [[1, 2]]  # normalised to JSON types, as Django does


def test_refresh_keeps_a_queued_result():
    result = tasks.noop.enqueue()
    before = (result.status, result.enqueued_at)
    result.refresh()
    assert (result.status, result.enqueued_at) == before


def test_get_missing_result():
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("no-such-job")
    with pytest.raises(TaskResultDoesNotExist):
        tasks.noop.get_result("")


def test_get_result_of_another_task_is_a_mismatch():
    result = tasks.noop.enqueue()
    with pytest.raises(TaskResultMismatch, match="Task does not match"):
        tasks.add.get_result(result.id)


def test_get_result_of_a_plain_watchdog_job_does_not_exist():
    wd.enqueue("native", queue="q", lane="task:tasks", payload={"hello": 1})
    with pytest.raises(TaskResultDoesNotExist, match="not a Django task"):
        default_task_backend.get_result("native")


def test_get_result_never_resolves_a_non_task_path():
    for function in ("plain_function", "alias_of_add", "os.system"):
        payload = {
            "kind": PAYLOAD_KIND,
            "backend": "default",
            "module": "tests.tasks_app.tasks",
            "function": function,
            "args": [],
            "kwargs": {},
        }
        wd.enqueue(f"forged-{function}", queue=f"q-{function}", lane="task:tasks", payload=payload)
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(f"forged-{function}")


def test_priority_maps_onto_watchdog_priority_and_claim_order():
    low = tasks.noop.using(priority=-5).enqueue()
    high = tasks.noop.using(priority=100).enqueue()
    middle = tasks.noop.enqueue()
    also_middle = tasks.noop.enqueue()

    assert [wd.get_job(r.id).priority for r in (low, high, middle)] == [-5, 100, 0]
    order = []
    for _ in range(4):
        claimed = Store().claim(Partition(lanes=["task:tasks"]))
        order.append(claimed.job.job_id)
    assert order == [high.id, middle.id, also_middle.id, low.id]
    assert tasks.noop.using(priority=-5).get_result(low.id).task.priority == -5


def test_invalid_priority_is_rejected_by_django():
    for priority in (-101, 101, 3.1):
        with pytest.raises(InvalidTask, match="priority must be a whole number"):
            tasks.noop.using(priority=priority)


def test_queue_name_is_the_lane():
    result = tasks.noop.using(queue_name="tasks-bulk").enqueue()
    assert wd.get_job(result.id).lane == "task:tasks-bulk"
    assert default_task_backend.get_result(result.id).task.queue_name == "tasks-bulk"
    assert tasks.bulk.enqueue(3).task.queue_name == "tasks-bulk"


def test_unknown_queue_name_is_rejected():
    with pytest.raises(InvalidTask, match="Queue 'nope' is not valid for backend."):
        tasks.noop.using(queue_name="nope")


# -- deferral (run_after) ----------------------------------------------------------------


def test_run_after_is_accepted_and_makes_a_delayed_job():
    run_after = timezone.now() + timedelta(hours=1)
    deferred = tasks.add.using(run_after=run_after)
    result = deferred.enqueue(1, 2)

    assert result.status == TaskResultStatus.READY
    assert result.task.run_after == run_after
    job = wd.get_job(result.id)
    assert job.run_after == run_after
    assert job.delayed and job.position is None and not job.ready
    fetched = default_task_backend.get_result(result.id)
    assert fetched == result
    assert fetched.task.run_after == run_after


def test_a_deferred_task_is_not_claimed_before_its_time():
    now = timezone.now()
    run_after = now + timedelta(minutes=10)
    result = tasks.noop.using(run_after=run_after).enqueue()

    assert Store().claim(Partition(lanes=["task:tasks"])).status == "none"
    assert Store().promote_due(now=now) == 0
    assert Store().promote_due(now=run_after - timedelta(seconds=1)) == 0
    assert Store().claim(Partition(lanes=["task:tasks"])).status == "none"
    assert default_task_backend.get_result(result.id).status == TaskResultStatus.READY

    assert Store().promote_due(now=run_after + timedelta(seconds=1)) == 1
    claimed = Store().claim(Partition(lanes=["task:tasks"]))
    assert claimed.status == "claimed" and claimed.job.job_id == result.id
    assert default_task_backend.get_result(result.id).status == TaskResultStatus.RUNNING


def test_a_deferred_task_does_not_block_its_serial_queue():
    later = enqueue_task(
        tasks.add.using(run_after=timezone.now() + timedelta(hours=1)), (1, 2), queue="serial-9"
    )
    now = enqueue_task(tasks.add, (3, 4), queue="serial-9")

    claimed = Store().claim(Partition(lanes=["task:tasks"]))
    assert claimed.job.job_id == now.id
    assert wd.get_job(later.id).state == "queued"


def test_run_after_in_the_past_runs_at_once():
    result = tasks.noop.using(run_after=timezone.now() - timedelta(minutes=1)).enqueue()

    assert not wd.get_job(result.id).delayed
    assert Store().claim(Partition(lanes=["task:tasks"])).job.job_id == result.id


def test_run_after_must_be_aware():
    naive = datetime(2030, 1, 1, 12, 0)
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        tasks.noop.using(run_after=naive)
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        tasks.noop.using(run_after="2030-01-01T12:00:00+00:00")
    assert not Job.objects.exists()


@override_settings(USE_TZ=False)
def test_run_after_must_be_aware_even_without_use_tz():
    # Django checks awareness only with USE_TZ; watchdog needs an instant either way.
    with pytest.raises(InvalidTask, match="run_after must be an aware datetime"):
        tasks.noop.using(run_after=datetime(2030, 1, 1, 12, 0))


def test_run_after_is_part_of_the_idempotent_call():
    run_after = timezone.now() + timedelta(hours=1)
    first = enqueue_task(tasks.add.using(run_after=run_after), (1, 2), job_id="deferred-1")
    again = enqueue_task(tasks.add.using(run_after=run_after), (1, 2), job_id="deferred-1")
    assert again == first
    with pytest.raises(wd.JobConflict, match="run_after"):
        enqueue_task(
            tasks.add.using(run_after=run_after + timedelta(seconds=1)), (1, 2), job_id="deferred-1"
        )


def test_aenqueue_with_run_after():
    run_after = timezone.now() + timedelta(hours=1)

    async def scenario():
        result = await tasks.add.using(run_after=run_after).aenqueue(2, 3)
        return result, await tasks.add.using(run_after=run_after).aget_result(result.id)

    result, fetched = async_to_sync(scenario)()
    assert fetched == result
    assert wd.get_job(result.id).delayed


def test_enqueue_with_invalid_argument():
    with pytest.raises(TypeError, match="Unsupported type"):
        tasks.noop.enqueue(datetime.now())
    with pytest.raises(TypeError, match="Unsupported type"):
        tasks.noop.enqueue(x=object())
    assert not Job.objects.exists()


def test_enqueue_with_non_json_values_names_the_field():
    with pytest.raises(wd.InvalidInput, match="args"):
        tasks.noop.enqueue(math.nan)
    with pytest.raises(wd.InvalidInput, match="kwargs"):
        tasks.noop.enqueue(x={1: "int key"})
    assert not Job.objects.exists()


def test_enqueue_logs_like_django(caplog):
    caplog.set_level(logging.DEBUG, logger=NAME)
    result = tasks.noop.enqueue()
    messages = [r.getMessage() for r in caplog.records if r.name == NAME]
    assert len(messages) == 1
    assert "enqueued" in messages[0] and result.id in messages[0]


def test_enqueue_joins_the_callers_transaction():
    with pytest.raises(RuntimeError), transaction.atomic():
        result = tasks.noop.enqueue()
        assert wd.get_job(result.id) is not None
        raise RuntimeError("roll back")
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(result.id)
    assert not Job.objects.exists()


def test_enqueue_task_with_job_id_is_idempotent():
    first = enqueue_task(tasks.add, (1, 2), job_id="order-7:invoice")
    again = enqueue_task(tasks.add, [1, 2], job_id="order-7:invoice")

    assert first.id == again.id == "order-7:invoice"
    assert again == tasks.add.get_result("order-7:invoice")
    assert Job.objects.count() == 1
    with pytest.raises(wd.JobConflict, match="payload"):
        enqueue_task(tasks.add, (1, 3), job_id="order-7:invoice")


def test_enqueue_task_into_a_serial_queue():
    first = enqueue_task(tasks.add, (1, 2), queue="customer-9")
    second = enqueue_task(tasks.add, (3, 4), queue="customer-9")
    other = tasks.add.enqueue(5, 6)

    assert wd.get_job(first.id).queue == wd.get_job(second.id).queue == "customer-9"
    claimed = Store().claim(Partition(lanes=["task:tasks"]))
    assert claimed.job.job_id == first.id
    # The queue's next job waits for the running one; other queues do not.
    assert Store().claim(Partition(lanes=["task:tasks"])).job.job_id == other.id
    assert Store().claim(Partition(lanes=["task:tasks"])).status == "none"
    assert default_task_backend.get_result(first.id).status == TaskResultStatus.RUNNING
    assert default_task_backend.get_result(second.id).status == TaskResultStatus.READY


def test_enqueue_task_validates_its_arguments():
    with pytest.raises(wd.InvalidInput, match="queue"):
        enqueue_task(tasks.noop, queue="")
    with pytest.raises(wd.InvalidInput, match="job_id"):
        enqueue_task(tasks.noop, job_id="x" * 257)
    with pytest.raises(TypeError, match="Unsupported type"):
        enqueue_task(tasks.noop, kwargs={"when": datetime.now()})


@override_settings(TASKS={"other": {"BACKEND": DUMMY_BACKEND, "QUEUES": []}})
def test_enqueue_task_needs_a_watchdog_backend():
    with pytest.raises(InvalidTask, match="not WatchdogBackend"):
        enqueue_task(tasks.noop.using(backend="other"))


def test_long_job_id_gets_a_hashed_private_queue():
    result = enqueue_task(tasks.noop, job_id="j" * 256)
    queue = wd.get_job(result.id).queue
    assert queue.startswith("task:") and len(queue) == len("task:") + 64


# -- async twins --------------------------------------------------------------------------


def test_aenqueue_and_aget_result():
    async def scenario():
        result = await tasks.add.aenqueue(2, 3)
        fetched = await tasks.add.aget_result(result.id)
        await result.arefresh()
        return result, fetched

    result, fetched = async_to_sync(scenario)()
    assert fetched == result
    assert result.status == TaskResultStatus.READY
    assert wd.get_job(result.id).payload["args"] == [2, 3]


def test_aenqueue_with_invalid_argument():
    async def scenario():
        await tasks.noop.aenqueue(datetime.now())

    with pytest.raises(TypeError, match="Unsupported type"):
        async_to_sync(scenario)()


def test_aget_missing_result():
    async def scenario():
        await default_task_backend.aget_result("missing")

    with pytest.raises(TaskResultDoesNotExist):
        async_to_sync(scenario)()


def test_aenqueue_task_is_idempotent():
    async def scenario():
        first = await aenqueue_task(tasks.add, (1, 2), job_id="async-1", queue="serial")
        again = await aenqueue_task(tasks.add, (1, 2), job_id="async-1", queue="serial")
        return first, again

    first, again = async_to_sync(scenario)()
    assert first == again
    assert wd.get_job("async-1").queue == "serial"


def test_async_task_is_accepted():
    result = tasks.add_async.enqueue(1, 1)
    assert wd.get_job(result.id).payload["function"] == "add_async"


# -- system checks ------------------------------------------------------------------------


def test_django_checks_pass_for_the_configured_backend():
    assert list(check_tasks()) == []


def _backend_errors(params):
    backend = WatchdogBackend("checked", params)
    return {message.id: message.msg for message in backend.check()}


def test_check_rejects_invalid_lane_names(clean_handlers):
    errors = _backend_errors({"QUEUES": ["good", "not a lane!"]})
    assert set(errors) == {"django_watchdog.E103"}
    assert "'not a lane!' is not a task queue name" in errors["django_watchdog.E103"]
    assert "not a lane!" not in handlers.registered()


def test_check_requires_queues(clean_handlers):
    assert set(_backend_errors({"QUEUES": []})) == {"django_watchdog.E102"}


def test_check_reports_a_lane_owned_by_another_handler(clean_handlers):
    @wd.handler("task:owned-lane")
    def native(job):
        return None

    errors = _backend_errors({"QUEUES": ["owned-lane"]})
    assert set(errors) == {"django_watchdog.E104"}
    assert "native" in errors["django_watchdog.E104"]
    assert handlers.registered()["task:owned-lane"] is native


def test_check_reports_bad_options(clean_handlers):
    errors = _backend_errors(
        {
            "QUEUES": ["tasks"],
            "OPTIONS": {"DATABASE": "nowhere", "MAX_RECOVERIES": -1, "RETRIES": 3},
        }
    )
    assert set(errors) == {"django_watchdog.E105", "django_watchdog.E106", "django_watchdog.E107"}


@override_settings(
    TASKS={"default": {"BACKEND": "django_watchdog.backend.WatchdogBackend", "QUEUES": []}}
)
def test_queue_name_must_be_a_lane_name_even_without_queues(clean_handlers):
    with pytest.raises(InvalidTask, match="not a watchdog lane"):
        tasks.noop.using(queue_name="bad lane")


@override_settings(
    TASKS={
        "default": {
            "BACKEND": "django_watchdog.backend.WatchdogBackend",
            "QUEUES": ["tasks", "tasks-bulk"],
            "OPTIONS": {"DATABASE": "default", "MAX_RECOVERIES": 2},
        }
    }
)
def test_options_reach_the_job():
    assert task_backends["default"].check() == []
    result = tasks.noop.enqueue()
    assert wd.get_job(result.id).max_recoveries == 2
