"""What an operator reads stays flat as the job table grows: ``watchdog status``, the
admin's job and queue lists and its dashboard read a bounded number of job rows, whatever
the backlog.

The table: ``BACKLOG`` queued jobs behind one running job (one blocked queue), a settled
history over many queues, and a few lanes. Every statement each read runs is explained
again with ``EXPLAIN ANALYZE`` (tests/rows_read.py) and must read at most ``BOUND`` job
rows: a count or a GROUP BY over the queued jobs would read all of them. PostgreSQL only
(the planner counts the rows); on every database the reads must still answer.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_watchdog.admin import pagination
from django_watchdog.models import Job, Queue
from django_watchdog.ops import activity, pending, status
from django_watchdog.store.store import Store
from tests.rows_read import job_rows_read

# Committed rows, vacuumed and analyzed, as the bench builds its backlog (and as
# autovacuum leaves a table before long): the planner then knows the table as it is.
pytestmark = pytest.mark.django_db(transaction=True)

BACKLOG = 20_000
SETTLED = 20_000
#: Few queue rows beside the backlog, as at scale (the planner then probes each queue
#: rather than hashing every queued job, which on a small table costs less).
HISTORY_QUEUES = 10
#: The counts the reads may take exactly are lowered to this for the test (10,000 in use).
CAP = 100
#: Rows one statement may read: a bounded count, a page of 100, an index probe per lane.
BOUND = 2 * CAP + 100
ON_POSTGRES = os.environ.get("WATCHDOG_TEST_DB", "sqlite") == "postgres"


@pytest.fixture
def blocked_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pagination, "EXACT_COUNT_LIMIT", CAP)
    monkeypatch.setattr(status, "COUNT_CAP", CAP, raising=False)
    monkeypatch.setattr(status, "SETTLED_COUNT_CAP", CAP)
    monkeypatch.setattr(pending, "COUNT_CAP", CAP)
    # The dashboard's throughput reads the newest jobs by primary key, this many.
    monkeypatch.setattr(activity, "SCAN_JOBS", CAP)
    now = timezone.now()
    Queue.objects.bulk_create(
        [Queue(name="busy"), *(Queue(name=f"hist-{n}") for n in range(HISTORY_QUEUES))]
    )
    rows = [
        Job(
            job_id=f"done-{n}",
            queue=f"hist-{n % HISTORY_QUEUES}",
            lane=("mail", "sms")[n % 2],
            state="settled",
            outcome="completed",
            position=n + 1,
            feed_position=n + 1,
            enqueued_at=now - timedelta(hours=2),
            started_at=now - timedelta(hours=2),
            settled_at=now - timedelta(hours=1),
        )
        for n in range(SETTLED)
    ]
    rows.append(
        Job(
            job_id="busy-head",
            queue="busy",
            lane="slow",
            state="running",
            claim_token="token",  # noqa: S106
            claimed_by="w-1",
            position=SETTLED + 1,
            enqueued_at=now,
            started_at=now,
        )
    )
    rows += [
        Job(
            job_id=f"busy-{n:05d}",
            queue="busy",
            lane="slow",
            state="queued",
            position=SETTLED + 2 + n,
            enqueued_at=now,
        )
        for n in range(BACKLOG)
    ]
    Job.objects.bulk_create(rows, batch_size=1_000)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The queue table too: the statistics an earlier test's ANALYZE left (written in
            # place, kept past its rollback) may describe another set of queues.
            cursor.execute("VACUUM (ANALYZE) watchdog_job, watchdog_queue")
        elif connection.vendor == "mysql":
            cursor.execute("ANALYZE TABLE watchdog_job")
            cursor.fetchall()
        else:
            cursor.execute("ANALYZE")


def _heavy(queries: CaptureQueriesContext) -> dict[str, int]:
    """The statements of ``queries`` that read more than ``BOUND`` job rows (PostgreSQL
    counts them; elsewhere none), by the start of their text."""
    if not ON_POSTGRES:
        return {}
    read = job_rows_read(queries.captured_queries)
    assert read, "no statement read the job table"
    return {sql[:200]: rows for sql, rows in read.items() if rows > BOUND}


def _status(admin_client: Client) -> None:
    out = io.StringIO()
    call_command("watchdog", "status", stdout=out)
    assert "busy" in out.getvalue()


def _page(name: str, shown: bytes) -> Callable[[Client], None]:
    def read(admin_client: Client) -> None:
        response = admin_client.get(reverse(name))
        assert response.status_code == 200, name
        assert shown in response.content, name

    return read


def _unserved_lanes(admin_client: Client) -> None:
    # Each worker start logs the lanes with queued work it has no handler for: it read
    # every queued job (a DISTINCT over them), 0.7 s on a table of ten million jobs.
    assert Store().lanes_without_handler(["mail"]) == ["slow"]
    assert Store().lanes_without_handler(["slow"]) == []


#: Each read an operator's tools make, by what it is.
READS: dict[str, Callable[[Client], None]] = {
    "watchdog status": _status,
    "the admin's job list": _page("admin:django_watchdog_job_changelist", b"busy-19999"),
    "the admin's queue list": _page("admin:django_watchdog_queue_changelist", b"busy"),
    "the admin's dashboard": _page("admin:django_watchdog_dashboard", b"slow"),
    "a starting worker's lanes without a handler": _unserved_lanes,
}


@pytest.mark.usefixtures("blocked_queue")
def test_every_operator_read_reads_a_bounded_number_of_jobs(admin_client: Client) -> None:
    """Every read on one backlog (its build is most of the time: 11 s each on PostgreSQL
    on a slow day); the statements of every read that read too much, named together. The
    job list shows the newest job first."""
    heavy = {}
    for name, read in READS.items():
        with CaptureQueriesContext(connection) as queries:
            read(admin_client)
        heavy[name] = _heavy(queries)
    assert not any(heavy.values()), {name: found for name, found in heavy.items() if found}
