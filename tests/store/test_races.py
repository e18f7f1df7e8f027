"""PostgreSQL and MariaDB: concurrent claimers, out-of-order commits and the settled feed,
racing enqueues, cancels and recoveries. Each thread uses its own connection; the test
database is really committed to (``transaction=True``). SQLite has one writer at a time."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

import django_watchdog as wd
from django_watchdog import JobConflict
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job
from django_watchdog.store.claims import Partition
from django_watchdog.store.store import Store
from django_watchdog.store.worker_store import WorkerStore

from .helpers import DONE, assert_serial_in_order, in_background, in_threads

pytestmark = [pytest.mark.concurrent_writers, pytest.mark.django_db(transaction=True)]

#: Other sessions of this database waiting for a lock (MariaDB: a statement in flight
#: while every test thread but the waiter sits idle in its transaction; the processlist
#: shows the user's own threads without the PROCESS privilege).
LOCK_WAITERS = {
    "postgresql": (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
    ),
    "mysql": (
        "SELECT count(*) FROM information_schema.processlist WHERE db = DATABASE()"
        " AND command = 'Query' AND id <> CONNECTION_ID()"
    ),
}
#: Make this session's lock waits fail after a second, and undo it.
SHORT_LOCK_WAITS = {
    "postgresql": ("SET lock_timeout = '1s'", "RESET lock_timeout"),
    "mysql": (
        "SET SESSION innodb_lock_wait_timeout = 1",
        "SET SESSION innodb_lock_wait_timeout = DEFAULT",
    ),
}


def _lock_waiters() -> int:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The activity view is read once per transaction unless its snapshot is cleared.
            cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(LOCK_WAITERS[connection.vendor])
        return int(cursor.fetchone()[0])


def test_concurrent_claimers_never_share_a_job_or_a_queue() -> None:
    queues, per_queue, workers = 12, 6, 6
    for index in range(queues * per_queue):
        wd.enqueue(f"j{index:03}", queue=f"q{index % queues}", priority=index % 3)
    lock = threading.Lock()
    claimed_by: dict[str, int] = {}
    running: dict[str, str] = {}  # queue -> job now running, as the claimers saw it
    overlaps: list[tuple[str, str, str]] = []
    duplicates: list[str] = []

    def work(worker: int) -> int:
        done = 0
        idle_since = None
        while True:
            result = Store().claim(worker_id=f"w{worker}")
            if result.status != "claimed":
                # "none" can mean "all ready queues are locked right now": stop only once
                # nothing is pending at all.
                if not Job.objects.filter(state__in=["queued", "running"]).exists():
                    return done
                idle_since = idle_since or timezone.now()
                assert timezone.now() - idle_since < timedelta(seconds=60)
                continue
            idle_since = None
            job = result.job
            assert job is not None and result.claim_token is not None
            with lock:
                if job.job_id in claimed_by:
                    duplicates.append(job.job_id)
                claimed_by[job.job_id] = worker
                if job.queue in running:
                    overlaps.append((job.queue, running[job.queue], job.job_id))
                running[job.queue] = job.job_id
            with lock:
                # Leave the record before the settle commits: after it, the next job of the
                # queue may legitimately be claimed.
                del running[job.queue]
            settled = Store().settle(job.job_id, result.claim_token, DONE)[0]
            assert settled.status == "settled"
            done += 1

    counts = in_threads(workers, work)
    assert duplicates == []
    assert overlaps == []
    assert sum(counts) == queues * per_queue
    assert len(claimed_by) == queues * per_queue
    assert Job.objects.filter(state="settled", outcome="completed").count() == queues * per_queue

    # The database's record agrees.
    assert_serial_in_order(f"q{queue}" for queue in range(queues))


def test_out_of_order_commit_is_not_skipped_by_the_feed() -> None:
    """X enqueues first (lower id) but commits last; a reader that already read past Y,
    which was enqueued, run and settled meanwhile, still reads X afterwards."""
    inserted = threading.Event()
    commit = threading.Event()

    def writer_a(_: int) -> int:
        with transaction.atomic():
            result = wd.enqueue("x", queue="qx")
            inserted.set()
            assert commit.wait(timeout=30)
        return result.job.pk

    thread_results: list[Any] = []
    thread = threading.Thread(target=lambda: thread_results.append(in_threads(1, writer_a)))
    thread.start()
    assert inserted.wait(timeout=30)

    y = wd.enqueue("y", queue="qy")  # committed at once (autocommit)
    claim = Store().claim()
    assert claim.job is not None and claim.job.job_id == "y"  # x is invisible
    Store().settle("y", claim.claim_token or "", DONE)

    first = wd.settled_jobs()
    # x is not committed, so the reader cannot see it: y is all there is, and its cursor
    # must not make x unreachable later.
    assert [record.job.job_id for record in first] == ["y"]
    cursor = first[-1].cursor

    commit.set()
    thread.join(timeout=30)
    x_pk = thread_results[0][0]
    assert x_pk < y.job.pk  # x did take the lower sequence

    assert wd.settled_jobs(cursor) == []  # x is pending now: the horizon
    claim = Store().claim()
    assert claim.job is not None and claim.job.job_id == "x"
    Store().settle("x", claim.claim_token or "", DONE)
    after = wd.settled_jobs(cursor)
    assert [record.job.job_id for record in after] == ["x"]
    assert wd.settled_jobs(after[-1].cursor) == []
    # From the start, each appears exactly once.
    assert Counter(r.job.job_id for r in wd.settled_jobs()) == {"x": 1, "y": 1}


def test_reader_during_a_slow_settle_reads_every_job_once() -> None:
    """Feed readers racing with settles and enqueues never skip nor repeat a job."""
    total = 60
    for index in range(total):
        wd.enqueue(f"j{index:02}", queue=f"q{index % 10}")
    seen: list[str] = []
    stop = threading.Event()

    def reader() -> None:
        cursor = None
        while True:
            page = wd.settled_jobs(cursor, 7)
            seen.extend(record.job.job_id for record in page)
            if page:
                cursor = page[-1].cursor
            elif stop.is_set() and not Job.objects.filter(state__in=["queued", "running"]).exists():
                if not wd.settled_jobs(cursor, 7):
                    return

    def work(index: int) -> None:
        if index == 0:
            reader()
            return
        while True:
            result = Store().claim()
            if result.status == "none":
                if not Job.objects.filter(state__in=["queued", "running"]).exists():
                    stop.set()
                    return
                continue
            Store().settle(
                result.job.job_id,  # type: ignore[union-attr]
                result.claim_token or "",
                Decision.completed(),
            )[0]

    in_threads(4, work)
    assert sorted(seen) == sorted(f"j{index:02}" for index in range(total))
    assert len(seen) == len(set(seen))


def test_two_reapers_recover_one_disappeared_claim_exactly_once() -> None:
    rounds = 8
    for index in range(rounds):
        wd.enqueue(f"j{index}", queue=f"q{index}", max_recoveries=1)
        wd.enqueue(f"k{index}", queue=f"r{index}")
    for _ in range(rounds * 2):
        assert Store().claim(worker_id="vanished").status == "claimed"
    results = in_threads(2, lambda _: Store().recover(timeout=30))
    won = Counter(r.job.job_id for batch in results for r in batch)  # type: ignore[union-attr]
    assert set(won) == {f"j{i}" for i in range(rounds)} | {f"k{i}" for i in range(rounds)}
    assert set(won.values()) == {1}, won
    assert Job.objects.filter(job_id__startswith="j", state="queued", recovery_count=1).count() == (
        rounds
    )
    assert Job.objects.filter(job_id__startswith="k", outcome="interrupted").count() == rounds


def test_two_reapers_reconcile_the_same_claim_one_wins() -> None:
    wd.enqueue("j", queue="q", max_recoveries=5)
    for _ in range(5):
        claim = Store().claim()
        assert claim.claim_token is not None
        statuses = in_threads(2, lambda _: Store().reconcile("j", claim.claim_token).status)  # type: ignore[arg-type]  # noqa: B023
        assert sorted(statuses) == ["conflict", "requeued"]
    assert Job.objects.get(job_id="j").recovery_count == 5
    assert connection.vendor != "sqlite"


@pytest.mark.parametrize(("second_priority", "head"), [(5, "second"), (-5, "first")])
@pytest.mark.parametrize("existing", [False, True], ids=["new queue", "existing queue"])
@pytest.mark.parametrize("in_transaction", [True, False], ids=["atomic", "autocommit"])
def test_enqueues_racing_into_one_queue_leave_the_better_job_its_only_ready_head(
    second_priority: int, head: str, existing: bool, in_transaction: bool
) -> None:
    """The first enqueue creates the queue and makes its job the head without looking at
    other rows, or locks the queue that exists and displaces its head; a second one into
    the same queue, inside a transaction or not, waits for it, then places its job against
    the first's (its snapshot is taken after the wait)."""
    queue = "fresh"
    if existing:
        wd.enqueue("old", queue=queue, priority=-10)
    entered, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first() -> None:
        with transaction.atomic():
            wd.enqueue("first", queue=queue)
            entered.set()
            assert release.wait(10), "the test never released the first enqueue"

    def second() -> None:
        assert entered.wait(10)
        with transaction.atomic() if in_transaction else contextlib.nullcontext():
            wd.enqueue("second", queue=queue, priority=second_priority)

    threads = [in_background(first, errors), in_background(second, errors)]
    try:
        assert entered.wait(10)
        # The second enqueue must be waiting on the first's uncommitted or locked queue row.
        _wait_for_a_lock_wait("the second enqueue did not wait for the first's queue lock")
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not errors, errors
    ready = set(Job.objects.filter(queue=queue, ready=True).values_list("job_id", flat=True))
    assert ready == {head}
    assert wd.queue_head(queue).job_id == head


def test_a_taken_id_gives_back_the_queue_it_created_to_an_enqueue_waiting_for_it() -> None:
    """An enqueue outside any transaction creates its queue, then waits on an uncommitted
    job of its id; a third enqueue waits on that new queue. Once the id's job commits, the
    repeat is refused and leaves no queue; the third creates the queue itself, its job
    the head."""
    entered, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    refused: list[BaseException] = []

    def first() -> None:
        with transaction.atomic():
            wd.enqueue("j", queue="elsewhere")
            entered.set()
            assert release.wait(10), "the test never released the first enqueue"

    def repeat() -> None:
        try:
            wd.enqueue("j", queue="fresh")
        except JobConflict as error:
            refused.append(error)

    def third() -> None:
        wd.enqueue("k", queue="fresh")

    threads = [in_background(first, errors)]
    try:
        assert entered.wait(10)
        threads.append(in_background(repeat, errors))
        _wait_for_a_lock_wait("the repeat did not wait for the uncommitted job")
        threads.append(in_background(third, errors))
        _wait_for_a_lock_wait("the third enqueue did not wait for the new queue", waiters=2)
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not errors, errors
    assert len(refused) == 1
    assert Job.objects.get(job_id="j").queue == "elsewhere"
    assert wd.queue_head("fresh").job_id == "k"
    assert Job.objects.get(job_id="k").ready is True


def test_a_feed_read_with_nothing_to_number_leaves_the_clock_alone() -> None:
    """Readers polling an idle feed neither lock the feed clock nor write: one reader
    holding the clock (numbering a large batch, say) does not stall the others."""
    wd.enqueue("a", queue="q")
    claim = Store().claim()
    Store().settle("a", claim.claim_token or "", DONE)
    first = wd.settled_jobs()  # numbers "a", creating the clock row
    assert [record.job.job_id for record in first] == ["a"]

    holding, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold_the_clock() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM watchdog_feed_clock WHERE id = 1 FOR UPDATE")
            holding.set()
            assert release.wait(30), "the test never released the clock"

    holder = in_background(hold_the_clock, errors)
    try:
        assert holding.wait(10)
        short, default = SHORT_LOCK_WAITS[connection.vendor]
        with connection.cursor() as cursor:
            # A reader that queued for the lock fails at once instead of hanging the test.
            cursor.execute(short)
        try:
            assert wd.settled_jobs(first[-1].cursor) == []
            assert [record.job.job_id for record in wd.settled_jobs()] == ["a"]
        finally:
            with connection.cursor() as cursor:
                cursor.execute(default)
    finally:
        release.set()
        holder.join(timeout=30)
    assert not errors, errors


def test_two_cancels_racing_for_one_intent_id_on_two_queues_record_it_once() -> None:
    """Two queues, two locks: only the unique index stands between the two cancels. The
    second waits for the first's commit, then answers conflict (no raw IntegrityError)."""
    wd.enqueue("a", queue="q1")
    wd.enqueue("b", queue="q2")
    entered, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    second_result: list[str] = []

    def first() -> None:
        with transaction.atomic():
            assert wd.cancel("a", cancellation_id="shared").status == "recorded"
            entered.set()
            assert release.wait(10), "the test never released the first cancel"

    def second() -> None:
        assert entered.wait(10)
        second_result.append(wd.cancel("b", cancellation_id="shared").status)

    threads = [in_background(first, errors), in_background(second, errors)]
    try:
        assert entered.wait(10)
        _wait_for_a_lock_wait("the second cancel did not wait for the first's intent")
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=30)
    assert not errors, errors
    assert second_result == ["conflict"]
    intents = dict(Job.objects.values_list("job_id", "cancellation_id"))
    assert intents == {"a": "shared", "b": None}
    assert wd.cancel("b").status == "recorded", "b can still be cancelled"


def test_enqueue_many_locks_its_queues_in_name_order_so_it_cannot_deadlock() -> None:
    """A transaction holds queue ``qa`` and will want ``qb``; an ``enqueue_many`` naming
    ``qb`` first must wait for ``qa`` without holding ``qb``, or the two deadlock."""
    wd.enqueue("a0", queue="qa")
    wd.enqueue("b0", queue="qb")
    holds_a = threading.Event()
    errors: list[BaseException] = []

    def first() -> None:
        with transaction.atomic():
            wd.enqueue("a1", queue="qa")
            holds_a.set()
            _wait_for_a_lock_wait()
            wd.enqueue("b1", queue="qb")

    def second() -> None:
        assert holds_a.wait(timeout=30)
        wd.enqueue_many([{"job_id": "b2", "queue": "qb"}, {"job_id": "a2", "queue": "qa"}])

    threads = [in_background(first, errors), in_background(second, errors)]
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert set(Job.objects.values_list("job_id", flat=True)) == {"a0", "a1", "a2", "b0", "b1", "b2"}


def _wait_for_a_lock_wait(
    failure: str = "the second transaction never waited for the queue lock", waiters: int = 1
) -> None:
    """Until ``waiters`` other backends of this database wait on a lock; ``failure`` after
    30 s."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if _lock_waiters() >= waiters:
            return
        time.sleep(0.02)  # polling the server's lock graph, with a deadline
    raise AssertionError(failure)


def test_an_enqueue_demotes_a_head_another_writer_changed_meanwhile() -> None:
    # The head an enqueue displaces may be written meanwhile by a writer that does not take
    # the queue's lock (a feed read numbering it does). The enqueue waits for that row, then
    # must still take its ready flag: else the queue holds two ready jobs, and the lower one
    # may run first.
    wd.enqueue("low", queue="q")
    assert Job.objects.get(job_id="low").ready
    errors: list[BaseException] = []
    with transaction.atomic():
        Job.objects.filter(job_id="low").update(priority=F("priority"))  # a new row version
        enqueuing = in_background(lambda: wd.enqueue("high", queue="q", priority=5), errors)
        _wait_for_a_lock_wait("the enqueue never waited for the head's row")
    enqueuing.join(timeout=30)
    assert not errors and not enqueuing.is_alive(), errors
    ready = dict(Job.objects.filter(queue="q").values_list("job_id", "ready"))
    assert ready == {"low": False, "high": True}


def test_a_worker_settling_behind_an_enqueue_readies_the_job_that_enqueue_put_first() -> None:
    # The worker's settle and next claim go to PostgreSQL together (one exchange), the lock
    # first: the settle must still see what the transaction that held the queue committed
    # (its snapshot follows the lock), and ready the job that now heads the queue.
    wd.enqueue("a", queue="q")
    wd.enqueue("b", queue="q")
    claim = Store().claim(worker_id="w")
    assert claim.job is not None and claim.job.job_id == "a" and claim.claim_token
    errors: list[BaseException] = []
    answers: list[Any] = []

    def settle() -> None:
        answers.append(
            WorkerStore("default").settle(
                "a", claim.claim_token, DONE, claim_next=Partition(), worker_id="w"
            )
        )

    with transaction.atomic():
        wd.enqueue("urgent", queue="q", priority=5)  # holds the queue's lock until commit
        settling = in_background(settle, errors)
        _wait_for_a_lock_wait("the settle never waited for the queue lock")
    settling.join(timeout=30)
    assert not errors and not settling.is_alive(), errors
    ((settled, next_one),) = answers
    assert settled.status == "settled"
    assert next_one is not None and next_one.job is not None
    assert next_one.job.job_id == "urgent"
    states = dict(Job.objects.values_list("job_id", "state"))
    assert states == {"a": "settled", "b": "queued", "urgent": "running"}
    assert not Job.objects.get(job_id="b").ready
