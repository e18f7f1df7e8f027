"""Small helpers the store tests share: row snapshots and claim shortcuts."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import pytest
from django.db import connection, connections
from django.utils import timezone

from django_watchdog.domain.values import ClaimResult, Decision
from django_watchdog.models import FeedClock, Job, Queue, Worker
from django_watchdog.store.dialects import dialect
from django_watchdog.store.dialects.common import JOB_COLUMNS
from django_watchdog.store.store import Partition, Store
from tests.testapp.models import Projection

DONE = Decision.completed()
#: Every job column, as statements return them (the fields ``snapshot`` and ``row`` read).
ROW_FIELDS = JOB_COLUMNS


def snapshot() -> dict[str, list[tuple[Any, ...]]]:
    """Every row the store (and a projection receiver) could write, read without decoding."""
    return {
        "job": list(Job.objects.order_by("id").values_list(*ROW_FIELDS)),
        "queue": list(Queue.objects.order_by("name").values_list("name")),
        "clock": list(FeedClock.objects.values_list("id", "last_position")),
        "worker": list(Worker.objects.order_by("worker_id").values_list("worker_id")),
        "projection": list(Projection.objects.order_by("queue").values_list()),
    }


def row(job_id: str) -> dict[str, Any]:
    """The raw column values of one job (never decoded through the model)."""
    return Job.objects.filter(job_id=job_id).values(*ROW_FIELDS).get()


def claimed(*, worker_id: str | None = None, **lanes: Any) -> ClaimResult:
    """Claim (in the partition ``lanes``/``exclude_lanes``) and insist a job was handed out."""
    result = Store().claim(Partition(**lanes), worker_id=worker_id)
    assert result.status == "claimed", result
    assert result.job is not None and result.claim_token is not None
    return result


def claim_ids(*, worker_id: str | None = None, **lanes: Any) -> list[str]:
    """Claim and complete until nothing is ready; the job ids in claim order."""
    order = []
    while True:
        result = Store().claim(Partition(**lanes), worker_id=worker_id)
        if result.status == "none":
            return order
        assert result.job is not None
        order.append(result.job.job_id)
        if result.status == "claimed":
            assert result.claim_token is not None
            assert Store().settle(result.job.job_id, result.claim_token, DONE)[0].status == (
                "settled"
            )


def in_background(work: Callable[[], Any], errors: list[BaseException]) -> threading.Thread:
    """Start ``work`` in a thread on its own connection; an error it raises lands in ``errors``."""

    def run() -> None:
        try:
            work()
        except BaseException as error:  # noqa: BLE001 - handed back to the test thread
            errors.append(error)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def in_threads(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(index)`` in ``count`` threads started together; re-raise any error."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def run(index: int) -> None:
        barrier.wait(timeout=30)
        results[index] = work(index)

    threads = [in_background(partial(run, index), errors) for index in range(count)]
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads), "a thread hung"
    if errors:
        raise errors[0]
    return results


def assert_serial_in_order(queues: Iterable[str]) -> None:
    """The database's record of each queue: runs never overlap in time, and they ran in
    queue order (priority, then enqueue order)."""
    for queue in queues:
        jobs = list(
            Job.objects.filter(queue=queue)
            .order_by("started_at")
            .values_list("priority", "id", "started_at", "settled_at")
        )
        for earlier, later in zip(jobs, jobs[1:], strict=False):
            assert earlier[3] <= later[2], f"{queue}: runs overlap"
        assert [(-p, i) for p, i, *_ in jobs] == sorted((-p, i) for p, i, *_ in jobs)


def watchdog_settings(**overrides: Any) -> Any:
    """``override_settings`` of these ``WATCHDOG`` keys, keeping the test settings' others
    (through PgBouncer those declare the pooler: dropping them would prepare statements)."""
    from django.conf import settings
    from django.test import override_settings

    return override_settings(WATCHDOG={**settings.WATCHDOG, **overrides})


def raw_job_row(**columns: Any) -> dict[str, Any]:
    """The columns of a queued job row written with raw SQL, bypassing the model (and the
    store); ``columns`` replace or add to them."""
    return {
        "job_id": "raw",
        "queue": "q",
        "lane": "default",
        "priority": 0,
        "state": "queued",
        "recovery_count": 0,
        "attempts": 0,
        "ready": False,
        "delayed": False,
        "position": 10**9,
        "enqueued_at": timezone.now(),
        **columns,
    }


@contextmanager
def pipelined_messages() -> Iterator[list[str]]:
    """The protocol messages (``Parse``, ``Sync``, ``ErrorResponse``…) this thread's
    connection sent and received in the block, from libpq's trace; the list fills when the
    block ends. Skips the test unless an enqueue in autocommit is pipelined here
    (PostgreSQL, not behind a transaction pooler)."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's protocol trace")
    if not dialect("default").pipelined():
        pytest.skip("behind a transaction pooler an enqueue takes the transaction's way")
    import psycopg

    messages: list[str] = []
    with tempfile.TemporaryFile() as trace:
        pgconn = connection.connection.pgconn
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        try:
            yield messages
        finally:
            pgconn.untrace()
            trace.seek(0)
            for line in trace.read().decode().splitlines():
                fields = line.split("\t")
                if len(fields) > 2:  # a message's first line (an error's text may run on)
                    messages.append(fields[2])
