"""Idempotent, transactional enqueue (SPEC §4.1, §4.13)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

import django_watchdog as wd
from django_watchdog import JobConflict
from django_watchdog.models import Job
from django_watchdog.store.store import Store

from .helpers import DONE, row, snapshot

pytestmark = pytest.mark.django_db

ORIGINAL: dict[str, Any] = {
    "queue": "q",
    "lane": "mail",
    "priority": 3,
    "payload": {"to": "a@example.com", "n": [1, 2]},
    "max_recoveries": 2,
}


def test_new_job_is_queued_with_its_fields() -> None:
    result = wd.enqueue("j", **ORIGINAL)
    assert result.status == "queued"
    job = wd.get_job("j")
    assert job is not None
    assert (job.queue, job.lane, job.priority, job.payload, job.max_recoveries) == (
        "q",
        "mail",
        3,
        {"to": "a@example.com", "n": [1, 2]},
        2,
    )
    assert (job.state, job.outcome, job.recovery_count, job.failure_reason) == (
        "queued",
        None,
        0,
        None,
    )
    assert job.enqueued_at is not None and job.started_at is None and job.settled_at is None
    assert result.job.pk == job.pk and result.job.job_id == "j"


def test_defaults() -> None:
    wd.enqueue("j", queue="q")
    job = wd.get_job("j")
    assert job is not None
    assert (job.lane, job.priority, job.payload, job.max_recoveries) == ("default", 0, None, None)


def test_identical_repeat_is_a_duplicate_and_changes_nothing() -> None:
    wd.enqueue("j", **ORIGINAL)
    before = snapshot()
    # Same payload with keys in another order is the same payload.
    again = wd.enqueue("j", **{**ORIGINAL, "payload": {"n": [1, 2], "to": "a@example.com"}})
    assert again.status == "duplicate"
    assert again.job.job_id == "j" and again.job.payload == ORIGINAL["payload"]
    assert snapshot() == before


def test_duplicate_after_the_job_ran_returns_the_settled_job() -> None:
    wd.enqueue("j", **ORIGINAL)
    claim = Store().claim()
    assert claim.claim_token is not None
    Store().settle("j", claim.claim_token, DONE)
    again = wd.enqueue("j", **ORIGINAL)
    assert again.status == "duplicate"
    assert again.job.state == "settled"


@pytest.mark.parametrize(
    ("changes", "fields"),
    [
        ({"queue": "other"}, ("queue",)),
        ({"lane": "default"}, ("lane",)),
        ({"priority": 4}, ("priority",)),
        ({"payload": {"to": "b@example.com", "n": [1, 2]}}, ("payload",)),
        ({"payload": {"to": "a@example.com", "n": [2, 1]}}, ("payload",)),
        ({"payload": None}, ("payload",)),
        ({"max_recoveries": None}, ("max_recoveries",)),
        ({"max_recoveries": 3}, ("max_recoveries",)),
        ({"lane": "sms", "priority": -3}, ("lane", "priority")),
        (
            {"queue": "x", "lane": "y", "priority": 0, "payload": 1, "max_recoveries": 0},
            ("queue", "lane", "priority", "payload", "max_recoveries"),
        ),
    ],
    ids=lambda value: "-".join(value) if isinstance(value, tuple) else None,
)
def test_same_id_with_differences_conflicts_naming_each_and_writes_nothing(
    changes: dict[str, Any], fields: tuple[str, ...]
) -> None:
    wd.enqueue("j", **ORIGINAL)
    before = snapshot()
    with pytest.raises(JobConflict) as caught:
        wd.enqueue("j", **{**ORIGINAL, **changes})
    assert caught.value.fields == fields
    assert caught.value.job_id == "j"
    for field in fields:
        assert field in str(caught.value)
    assert snapshot() == before


def test_payload_types_are_not_conflated() -> None:
    """1 and 1.0 and True are different JSON values: not a duplicate."""
    wd.enqueue("j", queue="q", payload=1)
    with pytest.raises(JobConflict):
        wd.enqueue("j", queue="q", payload=True)
    with pytest.raises(JobConflict):
        wd.enqueue("j", queue="q", payload="1")


def test_boundary_values_round_trip() -> None:
    big = 2**53 - 1
    wd.enqueue("h" * 256, queue="q" * 256, lane="l" * 64, priority=big, max_recoveries=big)
    wd.enqueue("low", queue="q", priority=-big, payload={"deep": [[[{"x": "\u00e9\U0001f600"}]]]})
    high = wd.get_job("h" * 256)
    low = wd.get_job("low")
    assert high is not None and high.priority == big and high.max_recoveries == big
    assert low is not None and low.priority == -big
    assert low.payload == {"deep": [[[{"x": "\u00e9\U0001f600"}]]]}
    # And they are duplicates of themselves.
    assert (
        wd.enqueue(
            "low", queue="q", priority=-big, payload={"deep": [[[{"x": "\u00e9\U0001f600"}]]]}
        )
    ).status == "duplicate"


@pytest.mark.parametrize("many", [False, True], ids=["enqueue", "enqueue_many"])
def test_a_payload_is_stored_as_the_compact_text_its_checks_made(many: bool) -> None:
    """Where the payload column holds text (SQLite, MariaDB), the text the size cap
    counted is what is stored, its keys in the caller's order: the payload is encoded
    once. PostgreSQL's ``jsonb`` keeps the value, not the text."""
    from django.db import connection

    payload = {"z": [1, 2.5, "\u00e9"], "a": None}
    if many:
        wd.enqueue_many(
            [{"job_id": "j", "queue": "q", "payload": payload}, {"job_id": "k", "queue": "q"}]
        )
    else:
        wd.enqueue("j", queue="q", payload=payload)
    with connection.cursor() as cursor:
        cursor.execute("SELECT payload FROM watchdog_job WHERE job_id = %s", ["j"])
        (stored,) = cursor.fetchone()
    if connection.vendor != "postgresql":
        assert stored == '{"z":[1,2.5,"\\u00e9"],"a":null}'
    job = wd.get_job("j")
    assert job is not None and job.payload == payload
    assert list(job.payload) == (["z", "a"] if connection.vendor != "postgresql" else ["a", "z"])


def test_enqueue_joins_the_callers_transaction() -> None:
    with pytest.raises(RuntimeError), transaction.atomic():
        wd.enqueue("j", queue="q")
        assert wd.get_job("j") is not None
        raise RuntimeError("the view failed")
    assert wd.get_job("j") is None
    assert wd.queue_head("q").state == "idle"
    # The id is free again: the rollback took the job and its queue head with it.
    assert wd.enqueue("j", queue="q", priority=1).status == "queued"


def test_enqueue_ids_follow_enqueue_order() -> None:
    for name in ("a", "b", "c"):
        wd.enqueue(name, queue=f"q-{name}")
    ids = [row(name)["id"] for name in ("a", "b", "c")]
    assert ids == sorted(ids)


def _fields(job: Job) -> dict[str, Any]:
    return {field.attname: getattr(job, field.attname) for field in Job._meta.concrete_fields}


def test_the_returned_job_is_the_stored_row_field_for_field() -> None:
    """enqueue() builds its result from what it wrote: it must read as get_job() does."""
    from datetime import timedelta

    from django.utils import timezone

    later = timezone.now() + timedelta(hours=1)
    calls: list[dict[str, Any]] = [
        {"job_id": "plain", "queue": "fresh"},
        {
            "job_id": "second",
            "queue": "fresh",
            "priority": 9,
            "payload": {"b": [1, 2.5], "a": None},
        },
        {"job_id": "delayed", "queue": "fresh", "run_after": later, "max_recoveries": 3},
        {
            "job_id": "retrying",
            "queue": "other",
            "lane": "mail",
            "retry": wd.RetryPolicy(max_attempts=3),
            "timeout": 2.5,
        },
    ]
    for call in calls:
        job = wd.enqueue(**call).job
        assert _fields(job) == _fields(wd.get_job(job.job_id)), job.job_id
        assert job._state.adding is False and job._state.db == "default"
    many = wd.enqueue_many(
        [
            {"job_id": "m1", "queue": "fresh"},
            {"job_id": "m2", "queue": "brand-new", "payload": 7},
            {"job_id": "m3", "queue": "brand-new", "priority": 1},
        ]
    )
    for result in many:
        assert _fields(result.job) == _fields(wd.get_job(result.job.job_id)), result.job.job_id
    # Nothing beside the fields: a misspelt field would be an attribute of its own.
    loaded = set(wd.get_job("m1").__dict__)
    for result in [*many, wd.enqueue("single", queue="fresh")]:
        assert set(result.job.__dict__) == loaded, result.job.job_id


def test_model_init_receivers_see_the_jobs_the_store_returns() -> None:
    """Jobs are built without Model.__init__ only while nobody listens to its signals."""
    from django.db.models.signals import post_init

    seen: list[str] = []

    def receiver(sender: type[Job], instance: Job, **kwargs: Any) -> None:
        seen.append(instance.job_id)

    post_init.connect(receiver, sender=Job)
    try:
        wd.enqueue("one", queue="q")
        wd.enqueue_many([{"job_id": "two", "queue": "r"}])
        claimed = Store().claim()
    finally:
        post_init.disconnect(receiver, sender=Job)
    assert claimed.job is not None and claimed.job.job_id == "one"
    assert seen == ["one", "two", "one"]


def test_lengths_count_code_points_not_utf16_units() -> None:
    """256 astral characters are 256 code points (the documented rule) but 512 UTF-16
    units, which the seed would refuse: both databases store and return them whole."""
    longest = "\U0001f600" * 256
    assert wd.enqueue(longest, queue=longest).status == "queued"
    assert wd.cancel(longest, cancellation_id=longest).status == "recorded"
    job = wd.get_job(longest)
    assert job is not None
    assert (job.job_id, job.queue, job.cancellation_id) == (longest, longest, longest)
    assert wd.enqueue(longest, queue=longest).status == "duplicate"
    with pytest.raises(wd.InvalidInput, match="job_id"):
        wd.enqueue(longest + "\U0001f600", queue="q")
    with pytest.raises(wd.InvalidInput, match="reason"):
        wd.fail_lane("default", "\U0001f600" * 201)
    assert wd.fail_lane("default", "\U0001f600" * 200).jobs[0].failure_reason == "\U0001f600" * 200


@pytest.mark.postgres_only
def test_an_enqueue_into_an_existing_queue_locks_its_row_without_writing_it() -> None:
    """The queue's row is locked, not rewritten: no new version of it (and no dead one for
    vacuum) per enqueue, whether one job or a batch, and whether the row was committed
    before or inserted earlier in this transaction."""
    from django.db import connection

    def version() -> tuple[str, str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT ctid::text, xmax::text FROM watchdog_queue WHERE name = 'q'")
            (found,) = cursor.fetchall()
        return found

    wd.enqueue("a", queue="q")
    address = version()[0]
    wd.enqueue("b", queue="q")
    wd.enqueue_many([{"job_id": "c", "queue": "q"}, {"job_id": "d", "queue": "new"}])
    assert version()[0] == address
    assert [job.job_id for job in Job.objects.filter(queue="q").order_by("id")] == ["a", "b", "c"]
