"""Every statement the store runs is visible to Django's instrumentation.

``connection.execute_wrapper`` hooks (APM, tracing, sqlcommenter) and Django's query log
(``CaptureQueriesContext``, ``assertNumQueries``, ``DEBUG``) see the hot path too: enqueue,
claim, settle and head reads, on both databases, whether or not queries are being logged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import django_watchdog as wd
from django_watchdog.domain.values import Decision
from django_watchdog.store.store import Store
from django_watchdog.store.worker_store import WorkerStore

pytestmark = pytest.mark.django_db

DONE = Decision.completed()


@contextmanager
def watched() -> Iterator[list[str]]:
    """The statements ``execute_wrapper`` hooks see in this block."""
    seen: list[str] = []

    def record(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield seen


def _any(statements: list[str], *fragments: str) -> bool:
    return any(all(f in " ".join(s.split()) for f in fragments) for s in statements)


def _enqueued(statements: list[str]) -> bool:
    """The enqueue's insert, or on MariaDB the call of the procedure that holds it."""
    inserted = _any(statements, "INSERT INTO watchdog_job")
    return inserted or _any(statements, "CALL watchdog_enter_job")


def test_a_wrapper_sees_enqueue_claim_settle_and_head_statements() -> None:
    with watched() as enqueued:
        wd.enqueue("a", queue="q")
    with watched() as head:
        assert wd.queue_head("q").job_id == "a"
    with watched() as claim:
        claimed = Store().claim()
    assert claimed.status == "claimed"
    with watched() as settle:
        assert Store().settle("a", claimed.claim_token or "", DONE)[0].status == "settled"
    assert _enqueued(enqueued), enqueued
    assert _any(head, "FROM watchdog_job", "AS rank")
    assert _any(claim, "UPDATE watchdog_job", "claim_token =")
    assert _any(settle, "UPDATE watchdog_job SET", "state = 'settled'")


def test_a_wrapper_sees_a_batching_workers_settle_and_claim() -> None:
    for n in range(3):
        wd.enqueue(f"b{n}", queue=f"q{n}")
    store = WorkerStore("default")
    from django_watchdog.store.claims import Partition

    with watched() as statements:
        _, claimed = store.settle_and_claim([], claim_next=Partition(), limit=3, worker_id="w")
    assert len(claimed) == 3
    assert _any(statements, "UPDATE watchdog_job", "claim_token =")


def test_the_query_log_counts_enqueue_claim_settle_and_head_statements() -> None:
    with CaptureQueriesContext(connection) as enqueued:
        wd.enqueue("a", queue="q")
    with CaptureQueriesContext(connection) as head:
        wd.queue_head("q")
    with CaptureQueriesContext(connection) as claim:
        claimed = Store().claim()
    with CaptureQueriesContext(connection) as settle:
        Store().settle("a", claimed.claim_token or "", DONE)
    logged = {
        "enqueue": [q["sql"] for q in enqueued.captured_queries],
        "head": [q["sql"] for q in head.captured_queries],
        "claim": [q["sql"] for q in claim.captured_queries],
        "settle": [q["sql"] for q in settle.captured_queries],
    }
    assert _enqueued(logged["enqueue"]), logged
    assert _any(logged["head"], "AS rank"), logged
    assert _any(logged["claim"], "UPDATE watchdog_job", "claim_token ="), logged
    assert _any(logged["settle"], "state = 'settled'"), logged
