"""Every named constraint rejects a bad row written around the manager (SPEC §3, §4.2)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from django.db import IntegrityError, connection, models, transaction
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.models import FeedClock, Job, Queue
from django_watchdog.store.store import Store

from .helpers import DONE, claimed, raw_job_row

pytestmark = pytest.mark.django_db

MAX = 2**53 - 1


def _queued() -> Any:
    wd.enqueue("queued", queue="q")
    return Job.objects.filter(job_id="queued")


def _running() -> Any:
    wd.enqueue("running", queue="q")
    claimed()
    return Job.objects.filter(job_id="running")


def _settled(outcome: str = "completed") -> Any:
    wd.enqueue("settled", queue="q")
    token = claimed().claim_token or ""
    Store().settle("settled", token, DONE)
    jobs = Job.objects.filter(job_id="settled")
    if outcome != "completed":
        reason = "why" if outcome in ("failed", "interrupted") else None
        jobs.update(outcome=outcome, failure_reason=reason)
    return jobs


def _second_running_in_queue() -> None:
    _running()
    wd.enqueue("other", queue="q")
    Job.objects.filter(job_id="other").update(state="running", claim_token="t2", ready=False)


def _raw_insert(**columns: Any) -> None:
    """INSERT a job row with raw SQL, bypassing the model entirely."""
    values = raw_job_row(**columns)
    names = ", ".join(map(connection.ops.quote_name, values))  # `delayed`: reserved on MariaDB
    marks = ", ".join(["%s"] * len(values))
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO watchdog_job ({names}) VALUES ({marks})", list(values.values())
        )


# constraint name -> (description, a write that breaks it)
def _shared_intent() -> None:
    wd.enqueue("a", queue="q1")
    wd.enqueue("b", queue="q2")
    Job.objects.filter(job_id="a").update(cancellation_id="shared")
    Job.objects.filter(job_id="b").update(cancellation_id="shared")


BREAKERS: dict[str, list[tuple[str, Callable[[], None]]]] = {
    "watchdog_job_state_known": [
        ("unknown state", lambda: _queued().update(state="paused", ready=False)),
        ("raw insert", lambda: _raw_insert(state="done")),
    ],
    "watchdog_job_outcome_known": [
        ("unknown outcome", lambda: _settled().update(outcome="exploded")),
    ],
    "watchdog_job_queued_unclaimed": [
        ("queued with a token", lambda: _queued().update(claim_token="tok")),
        ("queued with an outcome", lambda: _queued().update(outcome="completed")),
        ("requeued keeping its token", lambda: _running().update(state="queued")),
        ("raw insert", lambda: _raw_insert(claim_token="tok")),
    ],
    "watchdog_job_running_claimed": [
        ("running without a token", lambda: _queued().update(state="running", ready=False)),
        ("running with an outcome", lambda: _running().update(outcome="completed")),
    ],
    "watchdog_job_settled_has_outcome": [
        ("settled without outcome", lambda: _running().update(state="settled", outcome=None)),
    ],
    "watchdog_job_reason_iff_failed": [
        ("failed without a reason", lambda: _settled().update(outcome="failed")),
        ("interrupted without a reason", lambda: _settled().update(outcome="interrupted")),
        ("completed with a reason", lambda: _settled().update(failure_reason="why")),
        ("cancelled with a reason", lambda: _settled("cancelled").update(failure_reason="x")),
        ("queued with a reason", lambda: _queued().update(failure_reason="why")),
    ],
    "watchdog_job_reason_not_empty": [
        ("empty reason", lambda: _settled("failed").update(failure_reason="")),
    ],
    "watchdog_job_priority_range": [
        ("above 2**53-1", lambda: _queued().update(priority=MAX + 1)),
        ("below -(2**53-1)", lambda: _queued().update(priority=-MAX - 1)),
    ],
    "watchdog_job_max_recoveries_not_negative": [
        ("negative budget", lambda: _queued().update(max_recoveries=-1)),
    ],
    "watchdog_job_recovery_count_not_negative": [
        ("negative count", lambda: _queued().update(recovery_count=-1)),
    ],
    "watchdog_job_names_not_empty": [
        ("empty job id", lambda: _queued().update(job_id="")),
        ("empty queue", lambda: _queued().update(queue="")),
        ("empty lane", lambda: _queued().update(lane="")),
    ],
    "watchdog_job_ready_is_queued": [
        ("ready while running", lambda: _running().update(ready=True)),
        ("ready once settled", lambda: _settled().update(ready=True)),
    ],
    "watchdog_job_one_running_per_queue": [
        ("second running job", _second_running_in_queue),
        (
            "raw insert running",
            lambda: (_running(), _raw_insert(state="running", claim_token="t2")),
        ),
    ],
    "watchdog_job_cancellation_id_unique": [
        ("one intent id on two jobs", _shared_intent),
    ],
    "watchdog_job_delayed_unpositioned": [
        ("no position", lambda: _queued().update(position=None)),
        ("delayed with a position", lambda: _queued().update(delayed=True)),
        (
            "delayed and ready",
            lambda: _raw_insert(delayed=True, position=None, ready=True, run_after=timezone.now()),
        ),
        ("delayed without run_after", lambda: _raw_insert(delayed=True, position=None)),
    ],
    "watchdog_job_attempts_not_negative": [
        ("negative attempts", lambda: _queued().update(attempts=-1)),
    ],
    "watchdog_job_timeout_positive": [
        ("zero timeout", lambda: _queued().update(timeout=0)),
    ],
    "watchdog_queue_name_not_empty": [
        ("empty queue name", lambda: Queue.objects.create(name="")),
    ],
    "watchdog_feed_clock_single": [
        ("second clock", lambda: FeedClock.objects.create(id=2)),
    ],
}

CASES = [
    pytest.param(name, breaker, id=f"{name}-{label.replace(' ', '_')}")
    for name, breakers in BREAKERS.items()
    for label, breaker in breakers
]


def test_every_named_constraint_has_a_case() -> None:
    declared = {
        constraint.name
        for model in (Job, Queue, FeedClock)
        for constraint in model._meta.constraints
    }
    assert declared == set(BREAKERS)


@pytest.mark.parametrize(("name", "breaker"), CASES)
def test_database_rejects_the_bad_row(name: str, breaker: Callable[[], None]) -> None:
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        breaker()
    # Both backends name the violated constraint (SQLite for CHECKs; UNIQUE lists columns).
    message = str(caught.value)
    if connection.vendor == "postgresql" or "CHECK" in message:
        assert name in message


def test_a_good_row_written_around_the_manager_is_accepted() -> None:
    """The raw-insert helper itself is sound: the failures above are the constraints'."""
    _raw_insert()
    assert Job.objects.filter(job_id="raw", state="queued").exists()


#: Values for each column the job table's row rules read: each rule's edges, and NULL where
#: the column may hold it.
RULE_COLUMN_VALUES: dict[str, tuple[Any, ...]] = {
    "attempts": (0, -1, 3),
    "delayed": (False, True),
    "position": (None, 1),
    "ready": (False, True),
    "run_after": (None, "2026-01-01T00:00:00+00:00"),
    "state": ("queued", "running", "settled", "paused"),
    "max_recoveries": (None, 0, -1),
    "job_id": ("j", ""),
    "queue": ("q", ""),
    "lane": ("l", ""),
    "outcome": (None, "completed", "failed", "cancelled", "outcome_unknown", "interrupted", "x"),
    "priority": (0, MAX, MAX + 1, -MAX, -MAX - 1),
    "claim_token": (None, "t"),
    "failure_reason": (None, "", "why"),
    "recovery_count": (0, -1),
    "timeout": (None, 0.0, 1.5, -1.0),
}
RULE_COLUMN_TYPES = {
    "attempts": "bigint",
    "delayed": "boolean",
    "position": "bigint",
    "ready": "boolean",
    "run_after": "timestamptz",
    "max_recoveries": "bigint",
    "priority": "bigint",
    "recovery_count": "bigint",
    "timeout": "double precision",
}


def _rule_rows(count: int) -> list[dict[str, Any]]:
    """``count`` rows of the columns' values: each value of each column in a row otherwise
    valid (a queued job, a completed one, a failed one), then seeded random mixes."""
    valid_queued = {name: values[0] for name, values in RULE_COLUMN_VALUES.items()}
    valid_queued.update(position=1)
    valid_settled = {**valid_queued, "state": "settled", "outcome": "completed"}
    valid_failed = {**valid_settled, "outcome": "failed", "failure_reason": "why"}
    rows = [
        {**base, name: value}
        for base in (valid_queued, valid_settled, valid_failed)
        for name, values in RULE_COLUMN_VALUES.items()
        for value in values
    ]
    chosen = random.Random(17)
    while len(rows) < count:
        rows.append({name: chosen.choice(values) for name, values in RULE_COLUMN_VALUES.items()})
    return rows


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL checks the rules in one function"
)
def test_the_rules_function_breaks_each_row_the_named_rules_break() -> None:
    """On PostgreSQL the job table's ``CHECK`` rules are one constraint calling
    ``watchdog_job_broken_rule`` (migration 0018): for every row, the rule it names is the
    first rule (by name, as PostgreSQL checks them) whose model constraint the row breaks,
    with ``NULL`` passing as in a ``CHECK``; ``NULL`` when the row breaks none."""
    checks = sorted(
        (c for c in Job._meta.constraints if isinstance(c, models.CheckConstraint)),
        key=lambda c: c.name,
    )
    columns = list(RULE_COLUMN_VALUES)
    rows = _rule_rows(3000)
    with connection.schema_editor(collect_sql=True, atomic=False) as editor:
        conditions = [c._get_check_sql(Job, editor) for c in checks]
    marks = ", ".join(f"%s::{RULE_COLUMN_TYPES.get(name, 'varchar')}" for name in columns)
    values = ", ".join(f"(%s, {marks})" for _ in rows)
    broken_by_checks = " ".join(
        f"WHEN NOT COALESCE(({condition}), TRUE) THEN '{check.name}'"
        for check, condition in zip(checks, conditions, strict=True)
    )
    arguments = ", ".join(connection.ops.quote_name(name) for name in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT n, CASE {broken_by_checks} END, watchdog_job_broken_rule({arguments}, FALSE)"
            f" FROM (VALUES {values}) AS watchdog_job (n, {arguments}) ORDER BY n",
            [value for n, row in enumerate(rows) for value in (n, *row.values())],
        )
        answers = cursor.fetchall()
    differing = [
        (rows[n], by_checks, by_function)
        for n, by_checks, by_function in answers
        if by_checks != by_function
    ]
    assert differing == []
    assert len(answers) == len(rows)
    # The sample reaches every rule, and rows that break none.
    assert {by_checks for _n, by_checks, _f in answers} == {c.name for c in checks} | {None}
