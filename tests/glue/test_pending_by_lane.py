"""Each lane's pending jobs (``ops.pending.by_lane``, what ``watchdog status``, the dashboard
and the metrics show): one index probe per lane and counts up to a cap, by the
``lane_pending`` index on every database."""

from __future__ import annotations

import pytest
from django.db import connection

import django_watchdog as wd
from django_watchdog.models import Job
from django_watchdog.ops import pending
from django_watchdog.store.store import Store

pytestmark = pytest.mark.django_db


def test_lanes_are_counted_up_to_the_cap() -> None:
    for n in range(5):
        wd.enqueue(f"b{n}", queue="b", lane="busy")
    wd.enqueue("c", queue="c", lane="calm")
    assert Store().claim().status == "claimed"
    found = pending.by_lane(Job.objects.order_by(), cap=3, count_on=False)
    assert set(found) == {"busy", "calm"}
    assert found["calm"] == pending.LanePending(queued=1, running=0)
    busy = found["busy"]
    assert (busy.running, busy.running_mark) == (1, "")
    if connection.vendor == "sqlite":  # no estimate: the cap, as a lower bound
        assert (busy.queued, busy.shown(pending.State.QUEUED)) == (3, "3+")
    else:
        assert busy.queued_mark == pending.ESTIMATED
    exact = pending.by_lane(Job.objects.order_by(), cap=3)
    if connection.vendor == "sqlite":  # counting on
        assert (exact["busy"].queued, exact["busy"].exact) == (4, True)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's query plans")
def test_on_sqlite_each_statement_searches_the_lane_pending_index() -> None:
    """As the statements run, with their bound parameters: SQLite uses a partial index
    only when the query states its condition with the same constants (a ``state__in``
    filter binds them as parameters, and every probe scanned the table)."""
    wd.enqueue("a", queue="a", lane="mail")
    wd.enqueue("b", queue="b", lane="sms")
    ran: list[tuple[str, tuple[object, ...]]] = []

    def keep(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        ran.append((sql, tuple(params or ())))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(keep):
        found = pending.by_lane(Job.objects.order_by(), cap=3)
    assert set(found) == {"mail", "sms"}
    assert len(ran) == 3 + 2 * 2  # a probe per lane and one finding none; two counts each
    with connection.cursor() as cursor:
        for sql, params in ran:
            cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            plan = " / ".join(row[-1] for row in cursor.fetchall())
            assert "INDEX watchdog_job_lane_pending" in plan, (sql, plan)
