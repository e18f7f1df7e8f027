"""Migrations on tables that hold rows, and those that change how the database checks
them: 0007 on a table that already holds what its new rules refuse (over-long default
intents, one intent id on several jobs; every intent is kept); 0018's rules function."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection, models
from django.db.migrations.executor import MigrationExecutor

import django_watchdog as wd
from django_watchdog.domain.states import default_cancellation_id
from django_watchdog.models import Job

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("django_watchdog", "0006_feed_indexes_positioned_only")]


@pytest.fixture
def at_0006() -> Iterator[MigrationExecutor]:
    """The schema as migration 0006 left it; migrated to the latest again afterwards."""
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("django_watchdog")
    executor.migrate(BEFORE)
    yield executor
    executor = MigrationExecutor(connection)
    executor.migrate(latest)


def _write_raw(job_id: str, queue: str, cancellation_id: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO watchdog_job (job_id, queue, lane, priority, state, recovery_count,"
            f" ready, {connection.ops.quote_name('delayed')}, position, attempts, enqueued_at,"
            " cancellation_id) VALUES (%s, %s, 'default', 0, 'queued', 0, TRUE, FALSE, 0, 0,"
            " CURRENT_TIMESTAMP, %s)",
            [job_id, queue, cancellation_id],
        )
        cursor.execute("UPDATE watchdog_job SET position = id WHERE job_id = %s", [job_id])


def test_0007_keeps_every_intent_and_makes_rows_fit(at_0006: MigrationExecutor) -> None:
    long_id = "j" * 256
    _write_raw(long_id, "q1", "cancel:" + long_id)  # 263 characters, as recorded before
    _write_raw("a", "q2", "shared")
    _write_raw("b", "q3", "shared")
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes("django_watchdog"))

    intents = dict(Job.objects.values_list("job_id", "cancellation_id"))
    assert intents[long_id] == default_cancellation_id(long_id)
    assert intents["a"] == "shared"  # the job that held it first keeps it
    assert intents["b"] != "shared" and intents["b"].startswith("cancel#dup:")
    assert all(len(intent) <= 256 for intent in intents.values())
    # Every row loads; a repeated plain cancel of the long id still replays.
    assert {job.job_id for job in Job.objects.all()} == {long_id, "a", "b"}
    assert wd.cancel(long_id).status == "replayed"
    assert wd.cancel("b", cancellation_id="shared").status == "conflict"


def _job_checks() -> set[str]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, "watchdog_job")
    return {name for name, about in found.items() if about["check"]}


def _rules_function_exists() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_proc WHERE proname = 'watchdog_job_broken_rule'")
        return cursor.fetchone() is not None


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="0018 changes nothing on other databases"
)
def test_0018_checks_the_job_rules_in_one_function_and_reverses() -> None:
    rules = {
        constraint.name
        for constraint in Job._meta.constraints
        if isinstance(constraint, models.CheckConstraint)
    }
    assert len(rules) == 15
    assert _job_checks() == {"watchdog_job_rules"} and _rules_function_exists()
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("django_watchdog")
    executor.migrate([("django_watchdog", "0017_job_vacuum_index_cleanup")])
    try:
        assert _job_checks() == rules and not _rules_function_exists()
    finally:
        MigrationExecutor(connection).migrate(latest)
    assert _job_checks() == {"watchdog_job_rules"} and _rules_function_exists()
