"""``bench.passage`` runs on the PostgreSQL server under test: the default worker's
statements and the prototype's (a job's passage in a table of its own) each drain watchdog's
serial queues, and it prints a row of figures per loop. Tiny counts: it proves the tool runs
and that the prototype keeps what it stands for (each job settled once, completed, a queue's
jobs one after another in their order); its figures mean nothing."""

import psycopg
import pytest

from tests.bench import smoke

PREFIX = "watchdog_passage_bench"
LABELS = ("statements", "passage")

pytestmark = [pytest.mark.acceptance, pytest.mark.postgres_only]

scratch = smoke.scratch_database(PREFIX)


@pytest.mark.timeout(300)
def test_both_loops_drain_serial_queues_in_order(scratch):
    printed = smoke.run_tool("bench.passage", "--jobs", "300", "--repeat", "1")
    rows = smoke.table_rows(printed, LABELS)
    assert list(rows) == list(LABELS)
    assert all(float(cells[0].replace(",", "")) > 0 for cells in rows.values()), rows
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname=scratch) as conn:
        by_loop = dict(
            conn.execute(
                "SELECT left(job_id, 1), count(*) FROM watchdog_job"
                " WHERE state = 'settled' AND outcome = 'completed' AND attempts = 1 GROUP BY 1"
            ).fetchall()
        )
        overlapping = conn.execute(smoke.RUNS_OUT_OF_ORDER).fetchone()[0]
        left = conn.execute("SELECT count(*) FROM watchdog_passage").fetchone()[0]
    assert by_loop == {"s": 300, "p": 300}
    assert overlapping == 0
    assert left == 0
