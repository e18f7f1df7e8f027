"""A vacuum of a large job table cleans its indexes, so a claim stays an index probe
(PostgreSQL).

Every job passes through the small partial indexes of pending jobs (the claim indexes
among them) and leaves a dead entry in each when it moves on. A claim walks its index from
the best end, where the entries of the jobs claimed before it gather, so a claim reads as
many index pages as there are dead entries before the first live one, until a vacuum
removes them. PostgreSQL skips that part of a vacuum when fewer than 2 % of the table's
pages hold dead rows (``vacuum_index_cleanup = auto``): with a history of millions of
settled jobs, a drain of thousands never gets there, and every claim walked the entries of
every job drained since the table last had that many dead rows.
"""

from __future__ import annotations

import pytest
from django.db import connection, transaction

import django_watchdog
from django_watchdog.store import claims
from django_watchdog.store.dialects import dialect
from django_watchdog.store.store import Store

# VACUUM runs outside a transaction: committed rows, as on a server.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.postgres_only]

#: Settled rows, inserted after the drained jobs: enough pages that the drained jobs' dead
#: rows, on the few pages they were enqueued into, stay under 2 % of them (1 % here).
HISTORY = 150_000
#: Jobs made ready, then claimed: their claim index entries die, several index pages of them.
DRAINED = 2_000

HISTORY_ROWS = """
INSERT INTO watchdog_job
    (id, position, job_id, queue, lane, priority, state, outcome, recovery_count, ready,
     delayed, attempts, enqueued_at, started_at, settled_at)
SELECT nextval(pg_get_serial_sequence('watchdog_job', 'id')), g, 'done-' || g, 'history',
       'mail', 0, 'settled', 'completed', 0, FALSE, FALSE, 1, now(), now(), now()
  FROM generate_series(1, %(rows)s) AS g
"""
CLAIM_INDEX_BLOCKS_READ = "SELECT pg_stat_get_xact_blocks_fetched('watchdog_job_claim'::regclass)"


def _claim_index_blocks_read() -> int:
    """Blocks of the claim index this transaction has read so far."""
    ((read,),) = dialect("default").fetch(CLAIM_INDEX_BLOCKS_READ)
    return int(read)


def test_a_claim_after_a_vacuum_reads_no_dead_entries_of_the_jobs_drained_before() -> None:
    django_watchdog.enqueue_many(
        {"job_id": f"drained-{n}", "queue": f"q{n}", "lane": "mail"} for n in range(DRAINED)
    )
    with connection.cursor() as cursor:
        cursor.execute(HISTORY_ROWS, {"rows": HISTORY})
    taken = claims.claim_ready("default", claims.Partition(), DRAINED, "w")
    assert len(taken) == DRAINED
    with connection.cursor() as cursor:
        cursor.execute("VACUUM watchdog_job")
    with transaction.atomic():
        read = _claim_index_blocks_read()
        assert Store().claim(worker_id="w").status == "none"
        read = _claim_index_blocks_read() - read
    # The claim and its "any job ready?" each descend the index to its one leaf; with the
    # drained jobs' 2,000 dead entries left in place, they read 17 blocks.
    assert read <= 4, f"the claim read {read} blocks of the claim index"
