"""Row locks (``OPTIONS["ROW_LOCKS"]``): an object task runs in one transaction that first
locks its object's row, so a request cannot delete the object between the task's read and
its write (the stale-index-row race of Wagtail's index tasks)."""

import threading
import time

import pytest
from django.db import DatabaseError, connection, transaction
from django.test import override_settings

from django_watchdog.store.waits import is_lock_busy
from django_watchdog.tasks import locks
from tests.tasks_app import drive, tasks
from tests.tasks_app.framework import task_backends
from tests.testapp.models import Projection

pytestmark = pytest.mark.django_db(transaction=True)

UPDATE = "tests.tasks_app.tasks.update_object_with"
BACKEND = "django_watchdog.backend.WatchdogBackend"
DEADLINE = 30.0


def backend_settings(**options):
    return override_settings(
        TASKS={
            "default": {"BACKEND": BACKEND, "QUEUES": ["tasks", "tasks-bulk"], "OPTIONS": options}
        }
    )


LOCKED = backend_settings(ROW_LOCKS={UPDATE: "django_watchdog.tasks.locks.model_object"})


@pytest.fixture
def during_update():
    """Set what the task does while it runs; reset afterwards."""

    def set_hook(hook):
        tasks.DURING_UPDATE = hook

    yield set_hook
    tasks.DURING_UPDATE = None


def projection() -> Projection:
    return Projection.objects.create(queue="q", head_state="idle")


def test_model_object_names_the_row_of_a_wagtail_shaped_call():
    row = projection()
    rows = locks.model_object(["testapp", "Projection", str(row.pk)], {})
    assert rows is not None and list(rows) == [row]
    assert locks.model_object(["testapp", "nosuchmodel", "1"], {}) is None
    assert locks.model_object(["only-one"], {}) is None


@pytest.mark.parametrize(
    ("row_locks", "in_a_transaction"),
    [({}, False), ({UPDATE: "django_watchdog.tasks.locks.model_object"}, True)],
    ids=["without a lock", "with a lock"],
)
def test_a_locked_task_runs_in_a_transaction(during_update, row_locks, in_a_transaction):
    row = projection()
    during_update(lambda pk: connection.in_atomic_block)
    with backend_settings(ROW_LOCKS=row_locks):
        tasks.update_object_with.enqueue("testapp", "projection", str(row.pk))
        assert drive.run_next().result is in_a_transaction


@LOCKED
def test_a_missing_object_locks_nothing_and_the_task_still_runs(during_update):
    during_update(lambda pk: Projection.objects.filter(pk=pk).exists())
    tasks.update_object_with.enqueue("testapp", "projection", "999999")
    job = drive.run_next()
    assert job.outcome == "completed" and job.result is False


@LOCKED
def test_a_task_that_raises_rolls_its_transaction_back(during_update):
    row = projection()

    def write_then_raise(pk):
        Projection.objects.filter(pk=pk).update(head_state="written")
        raise RuntimeError("after the write")

    during_update(write_then_raise)
    tasks.update_object_with.enqueue("testapp", "projection", str(row.pk))
    assert drive.run_next().outcome == "failed"
    assert Projection.objects.get(pk=row.pk).head_state == "idle"


#: A session's lock waits fail after a second, and back to the server's default.
SHORT_LOCK_WAITS = {
    "postgresql": ("SET lock_timeout = '1s'", "RESET lock_timeout"),
    "mysql": (
        "SET SESSION innodb_lock_wait_timeout = 1",
        "SET SESSION innodb_lock_wait_timeout = DEFAULT",
    ),
}


def delete_waits_for_the_task(pk: str) -> str:
    """From inside the task: delete the object in another session and report whether the
    delete had to wait for this task's transaction ("waited") or went through ("deleted").

    The delete's lock waits are bounded to a second: its lock wait running out, while the
    task (blocked here until the verdict) is the only other transaction, is the proof that
    it waited for the task. A delete that waited is then tried again without the bound, so
    it goes through once the task commits."""
    verdict: list[str] = []
    decided = threading.Event()

    def delete() -> None:
        short, default = SHORT_LOCK_WAITS[connection.vendor]
        try:
            with connection.cursor() as cursor:
                cursor.execute(short)
            try:
                with transaction.atomic():
                    Projection.objects.filter(pk=pk).delete()
                verdict.append("deleted")
            except DatabaseError as error:
                if not is_lock_busy(error):
                    raise
                verdict.append("waited")
                decided.set()
                with connection.cursor() as cursor:
                    cursor.execute(default)
                with transaction.atomic():
                    Projection.objects.filter(pk=pk).delete()
        finally:
            decided.set()
            connection.close()

    thread = threading.Thread(target=delete)
    thread.start()
    assert decided.wait(DEADLINE), "the delete neither finished nor waited within the deadline"
    assert verdict, "the delete failed"
    return verdict[0]


@pytest.mark.concurrent_writers
def test_without_a_lock_a_delete_goes_through_while_the_task_runs(during_update):
    row = projection()
    during_update(delete_waits_for_the_task)
    tasks.update_object_with.enqueue("testapp", "projection", str(row.pk))
    assert drive.run_next().result == "deleted"


@pytest.mark.concurrent_writers
@LOCKED
def test_with_a_lock_a_delete_waits_until_the_task_commits(during_update):
    row = projection()
    during_update(delete_waits_for_the_task)
    tasks.update_object_with.enqueue("testapp", "projection", str(row.pk))
    assert drive.run_next().result == "waited"
    deadline = time.monotonic() + DEADLINE
    while Projection.objects.filter(pk=row.pk).exists():  # the delete, once the task committed
        assert time.monotonic() < deadline, "the waiting delete did not go through"
        time.sleep(0.01)  # polling for the other session's commit, with a deadline


@backend_settings(ROW_LOCKS={UPDATE: "no.such.function"})
def test_check_reports_a_bad_lock_function():
    messages = [m for m in task_backends["default"].check() if m.id == "django_watchdog.E111"]
    assert len(messages) == 1 and "ROW_LOCKS" in messages[0].msg


@backend_settings(ROW_LOCKS=["not", "a", "dict"])
def test_check_reports_row_locks_that_are_not_a_dict():
    messages = [m for m in task_backends["default"].check() if m.id == "django_watchdog.E111"]
    assert len(messages) == 1 and "must be a dict" in messages[0].msg
