"""Serial keys, coalescing and the payload cap: the backend's per-task ``OPTIONS``."""

import threading

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.test import override_settings

import django_watchdog as wd
from django_watchdog.models import Job
from django_watchdog.store.store import Partition, Store
from django_watchdog.tasks import keys
from tests.tasks_app import drive, tasks
from tests.tasks_app.framework import TaskResultStatus, task_backends

pytestmark = pytest.mark.django_db(transaction=True)

UPDATE = "tests.tasks_app.tasks.update_object"
BACKEND = "django_watchdog.backend.WatchdogBackend"


def backend_settings(**options):
    return override_settings(
        TASKS={
            "default": {"BACKEND": BACKEND, "QUEUES": ["tasks", "tasks-bulk"], "OPTIONS": options}
        }
    )


KEYED = backend_settings(SERIAL_KEYS={UPDATE: "django_watchdog.tasks.keys.model_object"})
COALESCED = backend_settings(
    SERIAL_KEYS={UPDATE: "django_watchdog.tasks.keys.model_object"}, COALESCE=[UPDATE]
)


def test_model_object_reads_wagtails_call_shape():
    assert keys.model_object(["wagtailcore", "Page", "3"], {}) == "wagtailcore.page:3"
    assert keys.model_object([], {"app_label": "a", "model_name": "b", "pk": 7}) == "a.b:7"
    assert keys.model_object(["a", "b"], {"pk": 7}) == "a.b:7"
    assert keys.model_object(["only-one"], {}) is None


def test_without_a_key_every_call_has_a_queue_of_its_own():
    first = tasks.update_object.enqueue("app", "thing", "1")
    second = tasks.update_object.enqueue("app", "thing", "1")
    assert wd.get_job(first.id).queue != wd.get_job(second.id).queue


@KEYED
def test_calls_with_one_key_share_a_serial_queue_and_run_in_order():
    first = tasks.update_object.enqueue("app", "thing", "1")
    second = tasks.update_object.enqueue("app", "thing", "1")
    other = tasks.update_object.enqueue("app", "thing", "2")
    queue = wd.get_job(first.id).queue
    assert queue == f"task-key:{UPDATE}:app.thing:1"
    assert wd.get_job(second.id).queue == queue
    assert wd.get_job(other.id).queue != queue
    running, token = drive.claim()
    assert running.job_id == first.id
    # The second update of object 1 waits for the first; object 2 runs beside it.
    assert drive.claim()[0].job_id == other.id
    assert Store().claim(Partition(lanes=["task:tasks"])).status == "none"
    drive.run(running, token)
    assert drive.claim()[0].job_id == second.id


@KEYED
def test_an_explicit_queue_wins_over_the_key():
    from django_watchdog.backend import enqueue_task

    result = enqueue_task(tasks.update_object, ["app", "thing", "1"], queue="mine")
    assert wd.get_job(result.id).queue == "mine"


@COALESCED
def test_an_identical_call_still_queued_is_coalesced():
    first = tasks.update_object.enqueue("app", "thing", "1")
    again = tasks.update_object.enqueue("app", "thing", "1")
    assert again.id == first.id
    assert again.status == TaskResultStatus.READY
    assert tasks.update_object.enqueue("app", "thing", "2").id != first.id
    assert Job.objects.count() == 2


@COALESCED
def test_a_running_twin_is_not_coalesced_the_call_waits_behind_it():
    first = tasks.update_object.enqueue("app", "thing", "1")
    running, token = drive.claim()
    again = tasks.update_object.enqueue("app", "thing", "1")
    assert again.id != first.id
    assert wd.get_job(again.id).queue == running.queue
    drive.run(running, token)
    assert drive.run_next().job_id == again.id


@COALESCED
def test_a_coalesced_call_holds_its_twins_queue_until_its_transaction_commits():
    """The twin must start after the caller's changes commit, or it would read old state."""
    first = tasks.update_object.enqueue("app", "thing", "1")
    inside = threading.Event()
    release = threading.Event()
    claims = []

    def enqueue_in_a_transaction():
        try:
            with transaction.atomic():
                assert tasks.update_object.enqueue("app", "thing", "1").id == first.id
                inside.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=enqueue_in_a_transaction)
    thread.start()
    try:
        assert inside.wait(10)
        if connection.vendor == "postgresql":
            # The claim skips the locked queue instead of taking the twin under us.
            claims.append(Store().claim(Partition(lanes=["task:tasks"])).status)
    finally:
        release.set()
        thread.join(10)
    assert claims in ([], ["none"])
    assert drive.claim()[0].job_id == first.id


@COALESCED
def test_deferred_calls_are_not_coalesced():
    from datetime import timedelta

    from django.utils import timezone

    first = tasks.update_object.enqueue("app", "thing", "1")
    later = tasks.update_object.using(run_after=timezone.now() + timedelta(hours=1))
    assert later.enqueue("app", "thing", "1").id != first.id


@backend_settings(SERIAL_KEYS={UPDATE: "tests.tasks_app.tasks.odd_key"})
def test_a_key_function_returning_a_non_str_is_named_in_the_error():
    with pytest.raises(wd.InvalidInput, match="SERIAL_KEYS.*odd_key returned 42"):
        tasks.update_object.enqueue("bad", "thing", "1")
    assert Job.objects.count() == 0
    assert tasks.update_object.enqueue("good", "thing", "1").id


@backend_settings(SERIAL_KEYS={UPDATE: "tests.tasks_app.no_such.key"})
def test_a_missing_key_function_is_a_configuration_error():
    with pytest.raises(ImproperlyConfigured, match="SERIAL_KEYS"):
        tasks.update_object.enqueue("app", "thing", "1")


@backend_settings(
    SERIAL_KEYS={UPDATE: "tests.tasks_app.no_such.key", "x.y": 3},
    COALESCE=["tests.tasks_app.tasks.add"],
    MAX_PAYLOAD_BYTES=0,
)
def test_check_reports_bad_serial_keys_coalesce_and_cap():
    messages = task_backends["default"].check()
    ids = sorted(m.id for m in messages)
    assert ids == [
        "django_watchdog.E108",
        "django_watchdog.E108",
        "django_watchdog.E109",
        "django_watchdog.E110",
    ]
    assert any("'tests.tasks_app.tasks.add', which has no serial key" in m.msg for m in messages)


@backend_settings(MAX_PAYLOAD_BYTES=200)
def test_the_backends_payload_cap_applies_and_is_named():
    with pytest.raises(wd.InvalidInput, match=r"over the 200-byte cap \(TASKS\['default'\]"):
        tasks.echo.enqueue("x" * 300)
    assert Job.objects.count() == 0


@backend_settings(MAX_PAYLOAD_BYTES=4 * 1024 * 1024)
@override_settings(WATCHDOG={"MAX_PAYLOAD_BYTES": 1024})
def test_the_backends_payload_cap_may_exceed_the_global_one():
    result = tasks.echo.enqueue([f"https://example.com/page/{n}" for n in range(20_000)])
    assert wd.get_job(result.id) is not None
    with pytest.raises(wd.InvalidInput, match=r"WATCHDOG\['MAX_PAYLOAD_BYTES'\]"):
        wd.enqueue("native", queue="q", payload="x" * 2000)


@COALESCED
def test_a_call_with_a_chosen_id_is_not_coalesced_and_a_conflict_leaves_the_transaction_usable():
    from django_watchdog.backend import enqueue_task

    first = tasks.update_object.enqueue("app", "thing", "1")
    chosen = enqueue_task(tasks.update_object, ["app", "thing", "1"], job_id="mine")
    assert chosen.id == "mine" != first.id
    with transaction.atomic():
        with pytest.raises(wd.JobConflict):
            enqueue_task(tasks.update_object, ["app", "thing", "2"], job_id="mine")
        assert Job.objects.count() == 2  # the transaction still answers
