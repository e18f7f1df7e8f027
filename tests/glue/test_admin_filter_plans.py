"""The job list's filters on SQLite: each read searches a partial index, never the table.

SQLite uses a partial index only when the query repeats the index's condition, term for
term (a bound value compared with an equal constant counts): it proves nothing else, such
as ``outcome = 'failed'`` implying ``NOT outcome = 'completed'``. A filter that leaves a
condition unsaid reads every job of a long history to show a page.
"""

from __future__ import annotations

import pytest
from django.contrib.admin import SimpleListFilter
from django.db import connection
from django.db.models import QuerySet

import django_watchdog as wd
from django_watchdog.admin.jobs import OutcomeFilter, QueueFilter
from django_watchdog.models import Job

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's query plans"),
]


def _plan(jobs: QuerySet[Job]) -> list[str]:
    """SQLite's plan of the page the job list reads (newest first, 100 rows): one line per
    step, its detail only (``SCAN watchdog_job``, ``SEARCH watchdog_job USING INDEX …``)."""
    sql, params = jobs.order_by("-id")[:100].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return [str(row[-1]) for row in cursor.fetchall()]


def _reads(plan: list[str]) -> list[str]:
    return [step for step in plan if step.startswith(("SCAN", "SEARCH"))]


def _filtered(list_filter: type[SimpleListFilter], value: str) -> QuerySet[Job]:
    """The jobs the job list shows with ``list_filter`` set to ``value``."""
    chosen = list_filter(None, {list_filter.parameter_name: [value]}, Job, None)  # type: ignore[arg-type]
    filtered: QuerySet[Job] = chosen.queryset(None, Job.objects.all())  # type: ignore[arg-type]
    return filtered


@pytest.mark.parametrize("outcome", ["failed", "cancelled", "interrupted"])
def test_the_outcome_filter_searches_the_unsuccessful_jobs_index(outcome: str) -> None:
    plan = _plan(_filtered(OutcomeFilter, outcome))
    assert _reads(plan) == [
        "SEARCH watchdog_job USING INDEX watchdog_job_unsuccessful (outcome=?)"
    ], plan


def test_the_queue_filter_searches_an_index_for_each_part_of_the_queue() -> None:
    wd.enqueue("a", queue="q", lane="mail")
    plan = _plan(_filtered(QueueFilter, "q"))
    reads = _reads(plan)
    assert reads and all(step.startswith("SEARCH watchdog_job USING INDEX") for step in reads), plan
    assert {step.split()[4] for step in reads} == {
        "watchdog_job_head",
        "watchdog_job_queue_delayed",
        "watchdog_job_one_running_per_queue",
        "watchdog_job_queue_latest",
    }, plan
