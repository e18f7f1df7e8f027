"""The schema's rules hold on MariaDB as the migrations leave it (migrations 0009, 0011):
the database refuses two running jobs in one queue and a cancellation id on two jobs,
compares names byte for byte, keeps 4-byte UTF-8 and microseconds, checks JSON columns, and
has one sequence for job ids and positions.

Rows are written with the ORM and raw SQL, bypassing the store (the id sequence's test
enqueues through it, after the migration). The test database takes the server's default
collation (case-insensitive), as most sites do.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.models import Job, Queue

from .helpers import raw_job_row

pytestmark = [pytest.mark.mariadb_only, pytest.mark.django_db]

EXACT = "utf8mb4_nopad_bin"
TABLES = ("watchdog_job", "watchdog_queue", "watchdog_pruned_job", "watchdog_worker")


def _job(job_id: str, queue: str = "q", state: str = "queued", **fields: Any) -> Job:
    if state == "running":
        fields.setdefault("claim_token", f"token-{job_id}")
    return Job.objects.create(
        job_id=job_id, queue=queue, state=state, enqueued_at=timezone.now(), position=0, **fields
    )


def _refused(write: Any) -> None:
    with pytest.raises(IntegrityError), transaction.atomic():
        write()


def test_two_running_jobs_in_one_queue_are_refused() -> None:
    _job("first", state="running")
    _refused(lambda: _job("second", state="running"))
    second = _job("second")  # queued behind it is fine
    _refused(lambda: Job.objects.filter(pk=second.pk).update(state="running", claim_token="t"))
    # Once the first settles, the second may run.
    Job.objects.filter(job_id="first").update(state="settled", outcome="completed")
    Job.objects.filter(pk=second.pk).update(state="running", claim_token="t")
    assert Job.objects.filter(state="running").count() == 1


def test_queues_differing_in_case_accent_or_trailing_space_run_apart() -> None:
    for number, queue in enumerate(("q", "Q", "q ", "é", "e")):
        _job(f"job-{number}", queue=queue, state="running")
    assert Job.objects.filter(state="running").count() == 5
    assert Job.objects.get(queue="q", state="running").job_id == "job-0"


@pytest.mark.parametrize("other", ["a", "a ", "á", "ａ"])
def test_ids_are_compared_byte_for_byte(other: str) -> None:
    _job("A")
    _job(other)  # not a duplicate of "A"
    assert Job.objects.get(job_id=other).job_id == other
    assert Job.objects.get(job_id="A").job_id == "A"
    _refused(lambda: _job("A"))
    Queue.objects.create(name="A")
    Queue.objects.create(name=other)


def test_a_cancellation_id_names_one_job() -> None:
    _job("one", cancellation_id="intent")
    _job("two")
    _job("three")  # any number of jobs without an intent
    _refused(lambda: Job.objects.filter(job_id="two").update(cancellation_id="intent"))
    Job.objects.filter(job_id="two").update(cancellation_id="INTENT")


def test_four_byte_utf8_round_trips() -> None:
    name = "🦊 job 𝄞 " + "😀" * 200
    _job(name, queue="🦊", payload={"emoji": "🦊", "text": "𝄞"}, cancellation_id="🛑" * 256)
    job = Job.objects.get(job_id=name)
    assert (job.job_id, job.queue) == (name, "🦊")
    assert job.payload == {"emoji": "🦊", "text": "𝄞"}
    assert job.cancellation_id == "🛑" * 256


def test_timestamps_keep_microseconds() -> None:
    at = datetime(2026, 12, 1, 17, 30, 5, 123456, tzinfo=UTC)
    _job("timed", run_after=at, delayed=False)
    Job.objects.filter(job_id="timed").update(enqueued_at=at)
    job = Job.objects.get(job_id="timed")
    assert job.enqueued_at == at and job.run_after == at


def test_json_columns_hold_json_and_read_back_as_the_same_value() -> None:
    payload = {"b": [1, 2.5, None, True], "a": {"nested": "ü"}, "n": 2**53 - 1}
    _job("json", payload=payload)
    assert Job.objects.get(job_id="json").payload == payload
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE watchdog_job SET payload = 'not json' WHERE job_id = 'json'")


def test_every_text_column_is_exact() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name, collation_name FROM information_schema.columns"
            " WHERE table_schema = DATABASE() AND table_name IN %s"
            " AND collation_name IS NOT NULL",
            [TABLES],
        )
        columns = cursor.fetchall()
    assert {"job_id", "queue", "lane", "cancellation_id", "name"} <= {c[1] for c in columns}
    assert [c for c in columns if c[2] != EXACT] == []


def _mariadb_indexes() -> dict[str, dict[str, Any]]:
    with connection.cursor() as cursor:
        return connection.introspection.get_constraints(cursor, "watchdog_job")


def test_every_partial_index_and_unique_constraint_has_its_mariadb_equivalent() -> None:
    """Each keeps its name and its columns in order (the condition's columns may lead; a
    pending-feed index reads the pending-only position), so a partial index added to the
    model without a MariaDB form fails here."""
    built = _mariadb_indexes()
    # A queue's delayed jobs: the head index's prefix finds them there (migration 0014).
    assert built["watchdog_job_head"]["columns"][:3] == ["queue", "state", "delayed"]
    assert "watchdog_job_queue_delayed" not in built
    for index in Job._meta.indexes:
        if index.condition is None or index.name == "watchdog_job_queue_delayed":
            continue
        expected = [field.lstrip("-") for field in index.fields]
        if "_pend" in index.name:
            expected = ["feed_pending_position" if c == "feed_position" else c for c in expected]
        columns = built[index.name]["columns"]
        assert [column for column in columns if column in expected] == expected, index.name
    for constraint in Job._meta.constraints:
        if getattr(constraint, "condition", None) is not None and hasattr(constraint, "fields"):
            assert built[constraint.name]["unique"], constraint.name


def test_the_claim_reads_its_index() -> None:
    for number in range(200):
        _job(f"settled-{number}", queue=f"q{number}", state="settled", outcome="completed")
    _job("ready", ready=True)
    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN SELECT id FROM watchdog_job WHERE ready = TRUE"
            " ORDER BY priority DESC, position LIMIT 1 FOR UPDATE SKIP LOCKED"
        )
        plan = cursor.fetchall()
    assert "watchdog_job_claim" in str(plan)


@pytest.mark.django_db(transaction=True)
def test_the_migration_goes_back_to_what_django_built_and_forward_again() -> None:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("django_watchdog")
    executor.migrate([("django_watchdog", "0008_job_cancellation_requester_reruns")])
    try:
        assert "watchdog_job_one_running_per_queue" not in _mariadb_indexes()
        # The model needs no generated column (raw: it has columns 0008 had not yet).
        values = raw_job_row(job_id="written-at-0008", state="running", claim_token="t")
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO watchdog_job ({', '.join(map(connection.ops.quote_name, values))})"
                f" VALUES ({', '.join(['%s'] * len(values))})",
                list(values.values()),
            )
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
    assert _mariadb_indexes()["watchdog_job_one_running_per_queue"]["unique"]


def _sequences() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_NAME FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'SEQUENCE'"
        )
        return {name for (name,) in cursor.fetchall()}


def _insert_raw(**columns: Any) -> None:
    values = raw_job_row(**columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO watchdog_job ({', '.join(map(connection.ops.quote_name, values))})"
            f" VALUES ({', '.join(['%s'] * len(values))})",
            list(values.values()),
        )


@pytest.mark.django_db(transaction=True)
def test_the_id_sequence_starts_above_every_id_and_position_and_goes_away_going_back() -> None:
    """Migration 0011: job ids and positions come from one sequence, which starts above
    every stored id and position and every id ``AUTO_INCREMENT`` gave (a deleted row's)."""
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("django_watchdog")
    executor.migrate([("django_watchdog", "0010_job_trace_context")])
    try:
        assert "watchdog_job_id_seq" not in _sequences()
        _insert_raw(id=5000, job_id="promoted", position=7000)
        _insert_raw(id=9000, job_id="purged", queue="other")
        Job.objects.filter(job_id="purged").delete()
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(latest)
    assert "watchdog_job_id_seq" in _sequences()
    wd.enqueue("after", queue="q")
    after = Job.objects.get(job_id="after")
    assert after.pk > 9000 and after.position == after.pk
    ordered = Job.objects.filter(queue="q").order_by("position").values_list("job_id", flat=True)
    assert list(ordered) == ["promoted", "after"]
