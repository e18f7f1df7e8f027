"""The job admin and dashboard on a large table: no whole-table counts, each page stays fast.

``WATCHDOG_ADMIN_SCALE_ROWS`` sets the table size (default 200,000, a few seconds to
generate). On PostgreSQL and MariaDB. The figures in the project notes come from a run with
1,000,000 rows::

    WATCHDOG_TEST_DB=postgres WATCHDOG_ADMIN_SCALE_ROWS=1000000 \\
        .venv/bin/pytest tests/glue/test_admin_scale.py -s
"""

import os
import re
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from django_watchdog.models import Job
from tests.glue.page_budget import fastest

pytestmark = pytest.mark.django_db

ROWS = int(os.environ.get("WATCHDOG_ADMIN_SCALE_ROWS", "200000"))
#: The newest jobs are queued (the first of each of the 50,000 queues ready to claim).
QUEUED = int(os.environ.get("WATCHDOG_ADMIN_SCALE_QUEUED", "2000"))

# One statement: settled jobs over 50,000 queues and four lanes (1 in 50 failed, 1 in 500
# cancelled), the newest QUEUED queued (the oldest 50,000 of them ready), and 20 running in
# queues of their own. Written once for both databases: what differs (a JSON object, a
# time some seconds ago, the numbers 1 to n) is filled in per database by ``DIALECT``.
GENERATE_JOBS = """
INSERT INTO watchdog_job (
    job_id, queue, lane, priority, payload, max_recoveries, state, outcome, failure_reason,
    recovery_count, claim_token, claimed_by, cancellation_id, ready, feed_position, result,
    traceback, enqueued_at, started_at, settled_at, position, {delayed}, attempts)
SELECT
    CONCAT('job-', LPAD(CONCAT(g), 8, '0')),
    CASE WHEN g > %(n)s - 20 THEN CONCAT('run-', g) ELSE CONCAT('q-', g %% 50000) END,
    CASE g %% 4 WHEN 0 THEN 'default' WHEN 1 THEN 'mail' WHEN 2 THEN 'reports' ELSE 'slow' END,
    g %% 3,
    {json}('n', g, 'note', CONCAT('row ', g)),
    NULL,
    CASE WHEN g > %(n)s - 20 THEN 'running'
         WHEN g > %(n)s - %(queued)s THEN 'queued' ELSE 'settled' END,
    CASE WHEN g > %(n)s - %(queued)s THEN NULL
         WHEN g %% 500 = 0 THEN 'cancelled' WHEN g %% 50 = 0 THEN 'failed' ELSE 'completed' END,
    CASE WHEN g <= %(n)s - %(queued)s AND g %% 50 = 0 AND g %% 500 <> 0
         THEN CONCAT('ValueError: row ', g) END,
    0,
    CASE WHEN g > %(n)s - 20 THEN CONCAT('token-', g) END,
    CASE WHEN g > %(n)s - 20 THEN 'worker-1' END,
    NULL,
    g > %(n)s - %(queued)s AND g <= %(n)s - 20 AND g <= %(n)s - %(queued)s + 50000,
    CASE WHEN g <= %(n)s - %(queued)s THEN g END,
    CASE WHEN g <= %(n)s - %(queued)s THEN {json}('ok', g) END,
    NULL,
    {ago_n_minus_g},
    CASE WHEN g <= %(n)s - %(queued)s OR g > %(n)s - 20 THEN {ago_n_minus_g} END,
    CASE WHEN g <= %(n)s - %(queued)s THEN {ago_n_minus_g_less_half} END,
    g,
    FALSE,
    CASE WHEN g <= %(n)s - %(queued)s OR g > %(n)s - 20 THEN 1 ELSE 0 END
FROM {numbers}
"""
#: Per database: the pieces of ``GENERATE_JOBS``, then the statements that follow it (the
#: queues, the planner's statistics).
DIALECT = {
    "postgresql": (
        {
            "delayed": "delayed",
            "json": "jsonb_build_object",
            "ago_n_minus_g": "now() - make_interval(secs => %(n)s - g)",
            "ago_n_minus_g_less_half": "now() - make_interval(secs => %(n)s - g - 0.5)",
            "numbers": "generate_series(1, {rows}) AS g",
        },
        [
            "INSERT INTO watchdog_queue (name, created_at)"
            " SELECT DISTINCT queue, now() FROM watchdog_job ON CONFLICT DO NOTHING",
            "ANALYZE watchdog_job",
            "ANALYZE watchdog_queue",
        ],
    ),
    # MariaDB: the numbers from its sequence engine (``seq_1_to_<n>``, a table name). No
    # ANALYZE TABLE: it commits (the test's transaction would keep the rows), and InnoDB
    # samples a table's statistics again once a tenth of its rows changed.
    "mysql": (
        {
            "delayed": "`delayed`",
            "json": "JSON_OBJECT",
            "ago_n_minus_g": "UTC_TIMESTAMP(6) - INTERVAL (%(n)s - g) SECOND",
            "ago_n_minus_g_less_half": (
                "UTC_TIMESTAMP(6) - INTERVAL ((%(n)s - g) * 1000000 - 500000) MICROSECOND"
            ),
            "numbers": "(SELECT seq AS g FROM seq_1_to_{rows}) AS numbers",
        },
        [
            "INSERT INTO watchdog_queue (name, created_at)"
            " SELECT DISTINCT queue, UTC_TIMESTAMP(6) FROM watchdog_job"
            " WHERE queue NOT IN (SELECT name FROM watchdog_queue)",
        ],
    ),
}

#: Django's count of the whole table (names in double quotes on PostgreSQL, backticks on MariaDB).
WHOLE_TABLE_COUNT = re.compile(r'SELECT COUNT\(\*\) AS (["`])__count\1 FROM \1watchdog_job\1', re.I)


def timed(client, url):
    """The fastest of five renderings of ``url`` in seconds, its budget (``page_budget``),
    and the queries of one rendering."""
    client.get(url)  # warm caches and the session

    def render():
        response = client.get(url)
        assert response.status_code == 200, url

    seconds, budget = fastest(render)
    with CaptureQueriesContext(connection) as queries:
        client.get(url)
    if os.environ.get("WATCHDOG_ADMIN_SCALE_PROFILE"):
        for q in sorted(queries.captured_queries, key=lambda q: -float(q["time"]))[:4]:
            print(f"   {q['time']}s {q['sql'][:300]}")
    return seconds, budget, [q["sql"] for q in queries.captured_queries]


def generate():
    """Fill the tables with ``ROWS`` jobs (``QUEUED`` pending); the seconds it took. On
    PostgreSQL and MariaDB (SQLite is for one machine's small tables: skipped)."""
    if connection.vendor not in DIALECT:
        pytest.skip(f"no large table generated on {connection.vendor}")
    pieces, then = DIALECT[connection.vendor]
    jobs = GENERATE_JOBS.format(**pieces).replace("{rows}", str(ROWS))
    start = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(jobs, {"n": ROWS, "queued": QUEUED})
        for statement in then:
            cursor.execute(statement)
    return time.perf_counter() - start


def test_job_admin_on_a_large_table(admin_client):
    generated = generate()

    jobs = reverse("admin:django_watchdog_job_changelist")
    middle = ROWS // 2
    # By its job id: the table's ids come from a sequence other tests may have advanced.
    (pk,) = Job.objects.filter(job_id=f"job-{middle:08d}").values_list("pk", flat=True)
    detail = reverse("admin:django_watchdog_job_change", args=[pk])
    pages = {
        "job list": jobs,
        "job list, page 50": jobs + "?p=50",
        "filter state=queued": jobs + "?state__exact=queued",
        "filter state=settled": jobs + "?state__exact=settled",
        "filter outcome=cancelled": jobs + "?outcome=cancelled",
        "filter lane=slow": jobs + "?lane=slow",
        "filter lane + outcome": jobs + "?lane=mail&outcome=failed",
        "search job id prefix": jobs + f"?q=job-{middle // 100:06d}",
        "search queue": jobs + "?q=q-123",
        "job detail": detail,
        "queue list": reverse("admin:django_watchdog_queue_changelist"),
        "worker list": reverse("admin:django_watchdog_worker_changelist"),
        "dashboard": reverse("admin:django_watchdog_dashboard"),
    }
    report = [f"{ROWS:,} job rows ({QUEUED:,} queued) generated in {generated:.1f}s"]
    for name, url in pages.items():
        seconds, budget, queries = timed(admin_client, url)
        report.append(f"{name:28} {seconds * 1000:8.1f} ms  ({len(queries)} queries)")
        assert not [q for q in queries if WHOLE_TABLE_COUNT.search(q)], name
        assert seconds < budget, f"{name}: {seconds:.2f}s, budget {budget:.1f}s"
    print("\n" + "\n".join(report))
