"""``bench.rule_costs`` runs on the PostgreSQL server under test: it copies the migrated job
table three ways (the fifteen ``CHECK``\\s, migration 0018's one constraint, none), writes
rows in each, and prints a row of figures per copy. Tiny counts: it proves the tool runs
and that the copies hold what they stand for, its figures mean nothing."""

import psycopg
import pytest

from tests.bench import smoke

PREFIX = "watchdog_rule_costs"
LABELS = (
    "the 15 CHECK constraints",
    "one constraint calling watchdog_job_broken_rule",
    "none",
)

pytestmark = [pytest.mark.acceptance, pytest.mark.postgres_only]


scratch = smoke.scratch_database(PREFIX)


@pytest.mark.timeout(300)
def test_prints_each_variant_and_its_copies_hold_their_rules(scratch):
    printed = smoke.run_tool("bench.rule_costs", "--chunks", "1", "--rows", "20")
    rows = smoke.table_rows(printed, LABELS)
    assert list(rows) == list(LABELS)
    for label, cells in rows.items():
        assert len(cells) == 2 and all(float(c.split(",")[0]) > 0 for c in cells), (label, cells)
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname=scratch) as conn:
        checks = dict(
            conn.execute(
                "SELECT conrelid::regclass::text, count(*) FROM pg_constraint"
                " WHERE contype = 'c' AND conrelid::regclass::text LIKE 'rules_%'"
                " GROUP BY conrelid"
            ).fetchall()
        )
    assert checks == {"rules_as_checks": 15, "rules_as_function": 1}
