"""Retention: prune old settled jobs in batches, never ahead of the settled feed's horizon."""

import os
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.domain.values import Decision
from django_watchdog.engine.housekeeping import Housekeeping, retention
from django_watchdog.models import FeedClock, Job, PrunedJob, Queue
from django_watchdog.store.store import Partition, Store
from django_watchdog.store.worker_store import WorkerStore
from tests.rows_read import job_rows_read

from .helpers import watchdog_settings

pytestmark = pytest.mark.django_db(transaction=True)

DAY = timedelta(days=1)
SECOND = timedelta(seconds=1)


def run(job_id, queue=None, *, days_ago=0.0, decision=None):
    """Enqueue and settle ``job_id`` as if it settled ``days_ago`` days ago."""
    wd.enqueue(job_id, queue=queue or job_id)
    claimed = Store().claim(Partition(lanes=("default",)))
    assert claimed.job.job_id == job_id
    Store().settle(job_id, claimed.claim_token, decision or Decision.completed())
    Job.objects.filter(job_id=job_id).update(settled_at=timezone.now() - days_ago * DAY)


def remaining():
    return sorted(Job.objects.values_list("job_id", flat=True))


def test_prunes_only_settled_jobs_older_than_the_age():
    run("old-1", days_ago=10)
    run("old-2", days_ago=8, decision=Decision.failed("ValueError: x"))
    run("recent", days_ago=1)
    wd.enqueue("queued-later", queue="other")
    assert Store("default").prune(older_than=7 * DAY, now=timezone.now()) == 2
    assert remaining() == ["queued-later", "recent"]


def test_never_prunes_past_the_first_pending_job_of_the_feed():
    wd.enqueue("blocker", queue="slow", lane="slow")  # pending, and first in the feed
    run("behind", days_ago=30)
    assert Store("default").prune(older_than=DAY, now=timezone.now()) == 0
    assert "behind" in remaining()
    # The feed would not hand "behind" out either, until "blocker" settles.
    assert wd.settled_jobs() == []
    claimed = Store().claim(Partition(lanes=("slow",)))
    Store().settle("blocker", claimed.claim_token, Decision.completed())
    assert Store("default").prune(older_than=DAY, now=timezone.now()) == 1
    assert remaining() == ["blocker"]


def test_deletes_in_batches_of_the_given_size():
    for n in range(7):
        run(f"job-{n}", days_ago=5)
    batches = list(Store("default").prune_batches(older_than=DAY, now=timezone.now(), batch_size=3))
    assert batches == [3, 3, 1]
    assert remaining() == []


def test_max_batches_bounds_one_pass():
    for n in range(5):
        run(f"job-{n}", days_ago=5)
    assert (
        Store("default").prune(older_than=DAY, now=timezone.now(), batch_size=2, max_batches=2) == 4
    )
    assert remaining() == ["job-4"]


def test_a_feed_reader_keeps_its_place_across_a_prune():
    run("a", days_ago=5)
    run("b", days_ago=5)
    first = wd.settled_jobs(limit=1)
    assert [r.job.job_id for r in first] == ["a"]
    run("c", days_ago=0)
    assert Store("default").prune(older_than=DAY, now=timezone.now()) == 2
    assert [r.job.job_id for r in wd.settled_jobs(after=first[0].cursor)] == ["c"]


def test_retention_setting_accepts_seconds_and_timedelta():
    with watchdog_settings(RETENTION=3600):
        assert retention() == timedelta(hours=1)
    with watchdog_settings(RETENTION=timedelta(days=2)):
        assert retention() == 2 * DAY
    with watchdog_settings():
        assert retention() is None


class Clock:
    def __init__(self):
        self.mono = 0.0

    def now(self):
        return timezone.now()

    def monotonic(self):
        return self.mono


def test_workers_prune_periodically_when_retention_is_set():
    run("old", days_ago=3)
    clock = Clock()
    with watchdog_settings(RETENTION=2 * 86400):
        housekeeping = Housekeeping(WorkerStore("default"), clock, schedules={})
        housekeeping.run_due()
        assert remaining() == []
        run("old-too", days_ago=3)
        clock.mono += 30
        housekeeping.run_due()  # within the prune interval: not yet
        assert remaining() == ["old-too"]
        clock.mono += 31
        housekeeping.run_due()
        assert remaining() == []
    run("kept", days_ago=3)
    clock.mono += 120
    housekeeping.run_due()  # RETENTION unset: keep forever
    assert remaining() == ["kept"]


# The idempotency window: without ID_RETENTION it is the retention period; with it, a
# pruned job's id stays taken until ID_RETENTION after the job settled.


def test_without_id_retention_a_pruned_job_id_enqueues_as_a_new_job():
    run("receipt", days_ago=10)
    assert Store("default").prune(older_than=7 * DAY, now=timezone.now()) == 1
    assert wd.enqueue("receipt", queue="receipt").status == "queued"
    assert not PrunedJob.objects.exists()


@watchdog_settings(RETENTION=7 * DAY, ID_RETENTION=30 * DAY)
def test_with_id_retention_a_pruned_job_id_is_a_duplicate():
    run("receipt", days_ago=10, decision=Decision.failed("ValueError: x"))
    assert Store("default").prune(older_than=7 * DAY, now=timezone.now()) == 1
    assert remaining() == []

    again = wd.enqueue("receipt", queue="receipt", payload={"other": "arguments"})
    assert again.status == "duplicate"
    job = again.job
    assert (job.pk, job.job_id, job.queue, job.lane) == (None, "receipt", "receipt", "default")
    assert (job.state, job.outcome) == ("settled", "failed")
    assert remaining() == [], "nothing was written"

    results = wd.enqueue_many(
        [{"job_id": "fresh", "queue": "q"}, {"job_id": "receipt", "queue": "receipt"}]
    )
    assert [r.status for r in results] == ["queued", "duplicate"]
    assert remaining() == ["fresh"]


@watchdog_settings(ID_RETENTION=30 * DAY)
def test_pruned_ids_are_forgotten_once_id_retention_has_passed():
    run("recent", days_ago=10)
    run("ancient", days_ago=40)  # already past ID_RETENTION when pruned
    assert Store("default").prune(older_than=7 * DAY, now=timezone.now()) == 2
    assert list(PrunedJob.objects.values_list("job_id", flat=True)) == ["recent"]
    later = timezone.now() + 25 * DAY  # "recent" settled 35 days before then
    Store("default").prune(older_than=7 * DAY, now=later)
    assert not PrunedJob.objects.exists()
    assert wd.enqueue("recent", queue="recent").status == "queued"
    assert wd.enqueue("ancient", queue="ancient").status == "queued"


def test_turning_id_retention_off_forgets_the_kept_ids():
    with watchdog_settings(ID_RETENTION=30 * DAY):
        run("receipt", days_ago=10)
        Store("default").prune(older_than=7 * DAY, now=timezone.now())
    assert PrunedJob.objects.count() == 1
    Store("default").prune(older_than=7 * DAY, now=timezone.now())
    assert not PrunedJob.objects.exists()


# Bounded batches: a prune reads only the jobs older than its age, a batch at a time, and
# positions at most a batch of new jobs in the feed per batch.


def _settled_history(old: int, newer: int) -> None:
    """``old`` jobs settled 10 days ago and ``newer`` settled an hour ago, all positioned in
    the feed (the old ones first) and released (nothing pending)."""
    now = timezone.now()
    Queue.objects.bulk_create([Queue(name="history")])
    Job.objects.bulk_create(
        [
            Job(
                job_id=f"hist-{n:05d}",
                queue="history",
                state="settled",
                outcome="completed",
                position=n + 1,
                feed_position=n + 1,
                enqueued_at=now - (10 * DAY if n < old else timedelta(hours=2)),
                started_at=now - (10 * DAY if n < old else timedelta(hours=2)),
                settled_at=now - (10 * DAY if n < old else timedelta(hours=1)) + n * SECOND,
            )
            for n in range(old + newer)
        ],
        batch_size=1_000,
    )
    FeedClock.objects.update_or_create(id=1, defaults={"last_position": old + newer})
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE watchdog_job")


@pytest.mark.skipif(
    os.environ.get("WATCHDOG_TEST_DB", "sqlite") != "postgres",
    reason="rows read are counted by PostgreSQL's EXPLAIN ANALYZE",
)
def test_a_prune_batch_reads_no_job_newer_than_the_age():
    _settled_history(old=25, newer=3_000)
    with CaptureQueriesContext(connection) as queries:
        batches = list(
            Store("default").prune_batches(older_than=DAY, now=timezone.now(), batch_size=10)
        )
    assert batches == [10, 10, 5]
    read = job_rows_read(queries.captured_queries)
    assert read and max(read.values()) <= 10, read  # a batch: at most its 10 jobs


def test_a_prune_batch_positions_at_most_a_batch_of_new_jobs():
    for n in range(30):
        wd.enqueue(f"new-{n}", queue=f"q-{n}")  # unpositioned in the feed
    Store("default").prune(older_than=DAY, now=timezone.now(), batch_size=10, max_batches=1)
    assert Job.objects.filter(feed_position__isnull=False).count() == 10


def test_a_prune_walks_past_jobs_the_feed_holds_back():
    for n in range(3):
        run(f"early-{n}", days_ago=20)  # positioned before the blocker: released
    wd.enqueue("blocker", queue="slow", lane="slow")
    wd.settled_jobs()  # positions the blocker
    for n in range(5):
        run(f"late-{n}", days_ago=30)  # older, but positioned behind the blocker: held
    wd.settled_jobs()
    assert Store("default").prune(older_than=DAY, now=timezone.now(), batch_size=2) == 3
    assert remaining() == ["blocker", *(f"late-{n}" for n in range(5))]


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's one writer at a time")
def test_on_sqlite_a_prune_leaves_the_write_lock_free_between_batches(monkeypatch):
    """A writer waiting for SQLite's write lock sleeps between its tries (up to 0.1 s): a
    batch begun right after the last one's commit took the lock again before any woke, and
    two workers drained 26 jobs/s during a prune instead of 1,025. Between two batches the
    prune now holds no transaction for as long as the batch before took, and at least
    that longest sleep."""
    import time

    from django_watchdog.store import retention
    from django_watchdog.store.dialects.sqlite import BUSY_HANDLER_LONGEST_SLEEP

    for n in range(4):
        run(f"job-{n}", days_ago=5)
    spans = []
    kept = retention.prune_batch

    def timed(*args, **kwargs):
        started = time.monotonic()
        try:
            return kept(*args, **kwargs)
        finally:
            spans.append((started, time.monotonic()))

    monkeypatch.setattr(retention, "prune_batch", timed)
    assert Store("default").prune(older_than=DAY, now=timezone.now(), batch_size=1) == 4
    assert len(spans) == 5  # the fifth finds nothing more
    for (started, ended), (next_started, _) in zip(spans, spans[1:], strict=False):
        assert next_started - ended >= max(ended - started, BUSY_HANDLER_LONGEST_SLEEP)
