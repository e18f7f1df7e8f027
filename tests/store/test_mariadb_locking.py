"""What the MariaDB dialect will rely on, proven with raw SQL on the real server: claims
with ``SKIP LOCKED`` over the claim index, why connections read committed, the serial-queue
index across connections, feed positions in commit order, an enqueue repeated while the
first is uncommitted, and a deadlock rolling back the whole transaction.

Each connection is a raw driver connection of its own at READ COMMITTED (as
``tests/settings.py`` configures Django's), on the migrated test database. A connection
that must not wait is given a 1-second lock wait timeout: waiting shows as error 1205.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from .helpers import raw_job_row

pytestmark = [pytest.mark.mariadb_only, pytest.mark.django_db(transaction=True)]

LOCK_WAIT_TIMEOUT, DEADLOCK, DUPLICATE_KEY = 1205, 1213, 1062

#: A claim by a join, its plan pinned (the claim index, then each job's queue): left to the
#: optimizer, the plan follows the table's statistics, which earlier tests and InnoDB's
#: sampling leave, and the queue table read first locks no job it skips.
CLAIM = (
    "SELECT STRAIGHT_JOIN j.id FROM watchdog_job j FORCE INDEX (watchdog_job_claim)"
    " JOIN watchdog_queue q ON q.name = j.queue"
    " WHERE j.ready = TRUE ORDER BY j.priority DESC, j.position LIMIT 1"
    " FOR UPDATE SKIP LOCKED"
)


class Session:
    """One raw connection, autocommit off: each statement joins the open transaction."""

    def __init__(self, isolation: str = "READ COMMITTED") -> None:
        params = connection.get_connection_params()
        self.raw = connection.get_new_connection(params)
        self.raw.autocommit(False)
        #: The server's id of this connection (read now: the driver refuses calls on a
        #: connection another thread is using).
        self.thread_id = int(self.raw.thread_id())
        self.run(f"SET SESSION TRANSACTION ISOLATION LEVEL {isolation}")
        self.run("SET SESSION innodb_lock_wait_timeout = 1")

    def run(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        cursor = self.raw.cursor()
        cursor.execute(sql, params)
        rows = list(cursor.fetchall()) if cursor.description else []
        self.rowcount = cursor.rowcount
        cursor.close()
        return rows

    def commit(self) -> None:
        self.raw.commit()

    def rollback(self) -> None:
        self.raw.rollback()

    def error_of(self, sql: str, params: Any = None) -> int | None:
        """The server's error number for ``sql`` (``None`` if it succeeds)."""
        try:
            self.run(sql, params)
        except Exception as error:  # the driver's own error classes
            return int(error.args[0])
        return None


@pytest.fixture
def session() -> Iterator[Callable[..., Session]]:
    opened: list[Session] = []

    def open_session(isolation: str = "READ COMMITTED") -> Session:
        opened.append(Session(isolation))
        return opened[-1]

    yield open_session
    # End each connection from the server's side first: a thread still blocked in a
    # statement (a failed test) must not hold its locks, or hang the closing, until its
    # lock wait times out.
    killer = Session()
    for each in opened:
        killer.error_of(f"KILL {each.thread_id}")
        each.raw.close()
    killer.raw.close()


def insert_job(s: Session, job_id: str, queue: str, **columns: Any) -> int:
    # The raw driver takes naive datetimes: UTC, as Django stores them.
    values = raw_job_row(
        job_id=job_id,
        queue=queue,
        position=0,
        enqueued_at=timezone.now().replace(tzinfo=None),
        **columns,
    )
    s.run("INSERT IGNORE INTO watchdog_queue (name, created_at) VALUES (%s, NOW(6))", [queue])
    names = ", ".join(f"`{name}`" for name in values)  # `delayed` is a reserved word
    [(new_id,)] = s.run(
        f"INSERT INTO watchdog_job ({names}) VALUES ({', '.join(['%s'] * len(values))})"
        " RETURNING id",
        list(values.values()),
    )
    s.run("UPDATE watchdog_job SET position = id WHERE id = %s", [new_id])
    return int(new_id)


def ready_jobs(s: Session, count: int) -> list[int]:
    ids = [insert_job(s, f"job-{n}", f"q{n}", ready=True) for n in range(count)]
    s.commit()
    return ids


def waits(observer: Session, waiter: Session) -> bool:
    """Whether ``waiter``'s statement is in flight on the server now. The statements these
    tests start in a thread can only end by a lock being granted or timing out, so the
    outcome each test asserts shows the wait itself."""
    rows = observer.run(
        "SELECT command FROM information_schema.processlist WHERE id = %s",
        [waiter.thread_id],
    )
    return rows == [("Query",)]


def eventually(condition: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = threading.Event()
    timer = threading.Timer(seconds, deadline.set)
    timer.start()
    try:
        while not condition():
            assert not deadline.is_set(), "condition not reached in time"
            deadline.wait(0.01)
    finally:
        timer.cancel()


def in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(work())
        except Exception as error:  # handed to the test to assert on
            outcome.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_two_claims_take_different_jobs_without_waiting(session: Any) -> None:
    writer, first, second = session(), session(), session()
    ids = ready_jobs(writer, 3)
    assert first.run(CLAIM) == [(ids[0],)]
    assert second.run(CLAIM) == [(ids[1],)]  # skipped the locked one, did not wait
    plan = str(second.run("EXPLAIN " + CLAIM))
    assert "watchdog_job_claim" in plan


def test_a_claim_joined_to_a_locked_queue_skips_the_job_but_keeps_the_job_locked(
    session: Any,
) -> None:
    """No ``FOR UPDATE OF`` on MariaDB: a join locks the rows of both tables, and a job
    skipped because its queue row is locked stays locked by the claim until it ends. (The
    settle holding that queue then waits for the claim to end.)"""
    writer, settler, claimer, other = session(), session(), session(), session()
    ids = ready_jobs(writer, 2)
    settler.run("SELECT name FROM watchdog_queue WHERE name = 'q0' FOR UPDATE")
    assert claimer.run(CLAIM) == [(ids[1],)]
    lock_job = "SELECT id FROM watchdog_job WHERE id = %s FOR UPDATE NOWAIT"
    assert other.error_of(lock_job, [ids[0]]) == LOCK_WAIT_TIMEOUT
    claimer.commit()
    assert other.run(lock_job, [ids[0]]) == [(ids[0],)]


@pytest.mark.parametrize(
    ("index", "skipped_stays_locked"),
    [("watchdog_job_ready", False), ("watchdog_job_claim", True)],
)
def test_a_claim_that_locks_queues_first_leaves_skipped_jobs_unlocked_only_by_queue(
    session: Any, index: str, skipped_stays_locked: bool
) -> None:
    """The claim the dialect runs: candidates by a plain read of the claim index, then
    their queues locked with ``SKIP LOCKED``, then the jobs of the queues it holds locked and
    re-read (still ready?) before they are updated. That last read leaves a skipped job
    unlocked only when it goes through the ``(queue, ready)`` index, which is why the
    dialect forces it: a walk of the claim index keeps the skipped job locked, READ
    COMMITTED or not. Each plan is forced here, as the optimizer's own choice follows the
    table's statistics (what earlier tests left), not this test."""
    writer, settler, claimer, other = session(), session(), session(), session()
    ids = ready_jobs(writer, 2)
    settler.run("SELECT name FROM watchdog_queue WHERE name = 'q0' FOR UPDATE")
    candidates = claimer.run(
        "SELECT id, queue FROM watchdog_job WHERE ready = TRUE"
        " ORDER BY priority DESC, position LIMIT 2"
    )
    held = claimer.run(
        "SELECT name FROM watchdog_queue WHERE name IN %s ORDER BY name FOR UPDATE SKIP LOCKED",
        [[queue for _, queue in candidates]],
    )
    assert held == [("q1",)]
    assert claimer.run(
        f"SELECT id FROM watchdog_job FORCE INDEX ({index})"
        " WHERE queue = 'q1' AND ready = TRUE FOR UPDATE"
    ) == [(ids[1],)]
    lock_job = "SELECT id FROM watchdog_job WHERE id = %s FOR UPDATE NOWAIT"
    error = other.error_of(lock_job, [ids[0]])
    assert error == (LOCK_WAIT_TIMEOUT if skipped_stays_locked else None)


@pytest.mark.parametrize(
    ("isolation", "blocked"), [("READ COMMITTED", False), ("REPEATABLE READ", True)]
)
def test_an_enqueue_waits_for_a_claim_in_flight_only_under_repeatable_read(
    session: Any, isolation: str, blocked: bool
) -> None:
    """REPEATABLE READ's next-key locks cover the gap before the claimed index entry, so an
    enqueue of a better job waits for the claim; READ COMMITTED takes no gap locks."""
    writer, claimer, enqueuer = session(), session(isolation), session(isolation)
    ids = ready_jobs(writer, 1)
    assert claimer.run(CLAIM) == [(ids[0],)]
    error = enqueuer.error_of(
        "INSERT INTO watchdog_job (job_id, queue, lane, priority, state, recovery_count,"
        " attempts, ready, `delayed`, position, enqueued_at)"
        " VALUES ('urgent', 'other', 'default', 5, 'queued', 0, 0, TRUE, FALSE, 0, NOW(6))"
    )
    assert error == (LOCK_WAIT_TIMEOUT if blocked else None)


def test_the_serial_queue_index_holds_across_connections(session: Any) -> None:
    writer, first, second = session(), session(), session()
    one, two = insert_job(writer, "one", "q"), insert_job(writer, "two", "q")
    writer.commit()
    running = "UPDATE watchdog_job SET state = 'running', claim_token = 't' WHERE id = %s"
    first.run(running, [one])
    # Uncommitted, the first running job already holds its index entry: the second waits...
    assert second.error_of(running, [two]) == LOCK_WAIT_TIMEOUT
    first.commit()
    # ...and once it commits, the second is a duplicate.
    assert second.error_of(running, [two]) == DUPLICATE_KEY


def test_feed_positions_follow_commit_order_when_commits_come_out_of_order(
    session: Any,
) -> None:
    """A job inserted first (lower id) but committed last is positioned after one that
    committed before it: the positioning reader skips the uncommitted insert, without
    waiting, under the clock's row lock; the next reader positions it later."""
    early, late, reader = session(), session(), session()
    early_id = insert_job(early, "early", "q1")  # lower id, commits last
    late_id = insert_job(late, "late", "q2")
    late.commit()
    assert early_id < late_id

    def position_new_rows() -> list[int]:
        reader.run("INSERT IGNORE INTO watchdog_feed_clock (id, last_position) VALUES (1, 0)")
        [(base,)] = reader.run(
            "SELECT last_position FROM watchdog_feed_clock WHERE id = 1 FOR UPDATE"
        )
        fresh = [
            row[0]
            for row in reader.run(
                "SELECT id FROM watchdog_job WHERE feed_position IS NULL AND `delayed` = FALSE"
                " ORDER BY id LIMIT 10000 FOR UPDATE SKIP LOCKED"
            )
        ]
        for rank, job in enumerate(fresh, start=1):
            reader.run(
                "UPDATE watchdog_job SET feed_position = %s WHERE id = %s", [base + rank, job]
            )
        reader.run(
            "UPDATE watchdog_feed_clock SET last_position = last_position + %s WHERE id = 1",
            [len(fresh)],
        )
        reader.commit()
        return fresh

    assert position_new_rows() == [late_id]
    early.commit()
    assert position_new_rows() == [early_id]
    positions = dict(reader.run("SELECT job_id, feed_position FROM watchdog_job"))
    assert positions == {"late": 1, "early": 2}


@pytest.mark.parametrize("first_ends", ["commit", "rollback"])
def test_a_repeated_enqueue_waits_for_the_first_then_is_refused_or_inserts(
    session: Any, first_ends: str
) -> None:
    """A repeat inserted while the first insert of its id is uncommitted waits for it;
    then it is refused as a duplicate (1062, the store's cue to read the stored job and
    compare) or, if the first rolled back, inserts. Never a second row.

    (``ON DUPLICATE KEY UPDATE`` cannot tell the two apart on Django's connections, whose
    ``FOUND_ROWS`` flag counts an unchanged duplicate as 1 row, like an insert.)"""
    first, repeat, observer = session(), session(), session()
    repeat.run("SET SESSION innodb_lock_wait_timeout = 30")
    insert_job(first, "same", "q")
    values = (
        "INSERT INTO watchdog_job (job_id, queue, lane, priority, state, recovery_count,"
        " attempts, ready, `delayed`, position, enqueued_at)"
        " VALUES ('same', 'q', 'default', 0, 'queued', 0, 0, FALSE, FALSE, 0, NOW(6))"
    )
    thread, outcome = in_thread(lambda: repeat.error_of(values))
    eventually(lambda: waits(observer, repeat))
    getattr(first, first_ends)()
    thread.join(30)
    assert outcome == [DUPLICATE_KEY if first_ends == "commit" else None]
    repeat.commit()
    assert observer.run("SELECT COUNT(*) FROM watchdog_job WHERE job_id = 'same'") == [(1,)]


def test_a_deadlock_rolls_back_the_whole_transaction_of_its_victim(session: Any) -> None:
    """So only a transaction the store began itself may be retried on error 1213."""
    writer, first, second, observer = session(), session(), session(), session()
    one, two = insert_job(writer, "one", "q1"), insert_job(writer, "two", "q2")
    writer.commit()
    for each in (first, second):
        each.run("SET SESSION innodb_lock_wait_timeout = 30")
    first.run("UPDATE watchdog_job SET priority = 1 WHERE id = %s", [one])
    second.run("UPDATE watchdog_job SET priority = 2 WHERE id = %s", [two])
    thread, outcome = in_thread(
        lambda: first.error_of("UPDATE watchdog_job SET priority = 1 WHERE id = %s", [two])
    )
    eventually(lambda: waits(observer, first))
    errors = [second.error_of("UPDATE watchdog_job SET priority = 2 WHERE id = %s", [one])]
    thread.join(30)
    errors += outcome
    assert sorted(errors, key=str) == sorted([DEADLOCK, None], key=str)
    survivor, victim = (first, second) if errors[0] == DEADLOCK else (second, first)
    survivor.commit()
    victim.commit()  # nothing left to commit: its first update was rolled back too
    priority = 1 if survivor is first else 2
    rows = observer.run("SELECT job_id, priority FROM watchdog_job")
    assert dict(rows) == {"one": priority, "two": priority}
