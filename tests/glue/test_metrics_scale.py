"""The metrics view on a large table: bounded queries, fast however many jobs settled.

Same table as ``test_admin_scale.py`` (``WATCHDOG_ADMIN_SCALE_ROWS``, default 200,000), on
PostgreSQL and MariaDB; ``scripts/admin-timing`` runs both with 1,000,000 rows.
"""

import os

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from prometheus_client.parser import text_string_to_metric_families

from tests.glue.page_budget import fastest
from tests.glue.test_admin_scale import QUEUED, ROWS, WHOLE_TABLE_COUNT, generate

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.urls("tests.metrics_urls"),
]

#: The view's own queries: the id range (2), the settled counts, the probe that finds no
#: further lane with pending jobs, the ready jobs, the running jobs, the workers.
FIXED_QUERIES = 7
#: And per lane with pending jobs (the table has 4): its probe, its queued and its running
#: jobs counted up to a cap.
PER_PENDING_LANE, PENDING_LANES = 3, 4


def test_the_metrics_view_on_a_large_table(client):
    generated = generate()
    client.get("/metrics/")  # warm caches

    def scrape():
        assert client.get("/metrics/").status_code == 200

    seconds, budget = fastest(scrape)
    with CaptureQueriesContext(connection) as captured:
        response = client.get("/metrics/")
    queries = [q["sql"] for q in captured.captured_queries]
    if os.environ.get("WATCHDOG_ADMIN_SCALE_PROFILE"):
        for q in sorted(captured.captured_queries, key=lambda q: -float(q["time"])):
            print(f"   {q['time']}s {q['sql'][:400]}")
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}
    queued = sum(s.value for s in families["watchdog_jobs_queued"].samples)
    running = sum(s.value for s in families["watchdog_jobs_running"].samples)
    assert queued + running == QUEUED
    print(
        f"\n{ROWS:,} job rows ({QUEUED:,} queued) generated in {generated:.1f}s\n"
        f"{'metrics view':28} {seconds * 1000:8.1f} ms  ({len(queries)} queries)"
    )
    assert len(queries) == FIXED_QUERIES + PER_PENDING_LANE * PENDING_LANES, queries
    assert not [q for q in queries if WHOLE_TABLE_COUNT.search(q)]
    assert seconds < budget, f"{seconds:.2f}s, budget {budget:.1f}s"
