"""The hot paths' statement budget: what one job of the default worker and one ``enqueue()``
send to the database, and what an idle worker sends while it waits (a claim that finds
nothing, a heartbeat), pinned so a round trip added back fails here.

The default worker, busy, does one thing per job: a transaction that settles the job it ran
and claims the next (``WorkerStore.settle`` with ``claim_next``). Counted is every exchange
Django's query log records (``CaptureQueriesContext``: statements, ``BEGIN``, ``COMMIT``),
on real transactions (``transaction=True``: no test savepoints in the count). The figures
are in docs/performance.md ("Where the time goes").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.store.claims import Partition, new_claim_token
from django_watchdog.store.worker_store import WorkerStore
from tests.store.helpers import DONE, pipelined_messages

pytestmark = pytest.mark.django_db(transaction=True)

#: What a busy default worker sends per job, and ``enqueue()`` per call in its own
#: transaction, by database vendor: every exchange with the server Django's query log records,
#: ``BEGIN`` and ``COMMIT`` included.
#: postgresql, while Django logs queries (which takes the steps' way): BEGIN; lock the job's
#: queue; settle and ready the queue's next head; claim; COMMIT; on the wire otherwise, one
#: exchange (``test_a_busy_default_worker_is_one_exchange_on_postgresql``). sqlite: BEGIN
#: IMMEDIATE; the job's queue; settle; the next head; mark it ready; claim; COMMIT. mysql
#: (MariaDB): BEGIN; lock the job's queue; settle; read the settled row (no RETURNING on
#: UPDATE); the queue's next head; mark it ready; the claim's four steps (candidates, hold
#: their queues, lock and re-read the ready jobs, take one); COMMIT.
SETTLE_AND_CLAIM = {"postgresql": 5, "sqlite": 7, "mysql": 11}
#: postgresql: BEGIN; create-or-lock the queue and insert; COMMIT. mysql: BEGIN; one block
#: that creates or locks the queue, inserts the job (id and position from the sequence) and
#: settles its queue's head; COMMIT.
ENQUEUE_NEW_QUEUE = {"postgresql": 3, "sqlite": 4, "mysql": 3}
#: postgresql: BEGIN; lock the queue (it exists); insert and settle its head; COMMIT.
#: sqlite: BEGIN; create the queue (it exists: nothing); insert, its ready flag decided by
#: the queue-head rule as it goes in (behind queued jobs: not ready, nothing to demote);
#: COMMIT. mysql: as into a new queue.
ENQUEUE_EXISTING_QUEUE = {"postgresql": 4, "sqlite": 4, "mysql": 3}
#: An idle worker's claim, every poll: one statement that takes nothing and says whether
#: ready jobs were left (skipped queues: try again), in autocommit. mysql: the same statement
#: (the claim's first step, which finds nothing) inside the claim's transaction: BEGIN, it,
#: COMMIT (the claim's four steps share one transaction, opened before the first).
IDLE_CLAIM = {"postgresql": 1, "sqlite": 1, "mysql": 3}
#: A heartbeat, every ``HEARTBEAT_INTERVAL``: one bounded statement, in autocommit.
HEARTBEAT = {"postgresql": 1, "sqlite": 1, "mysql": 1}


@contextmanager
def exchanges() -> Iterator[list[str]]:
    """What the block sent on this thread's connection, in order (``BEGIN`` and ``COMMIT``
    included: Django's query log records them)."""
    sent: list[str] = []
    with CaptureQueriesContext(connection) as captured:
        yield sent
    sent.extend(" ".join(query["sql"].split()) for query in captured.captured_queries)


def commits(sent: list[str]) -> int:
    return sum(1 for text in sent if text.upper() == "COMMIT")


def _budget(table: dict[str, int]) -> int:
    if connection.vendor not in table:
        pytest.skip(f"no statement budget recorded for {connection.vendor}")
    return table[connection.vendor]


def settle_and_claim_next(counting: Callable[[], AbstractContextManager[list[str]]]) -> list[str]:
    """A busy default worker's job, counted by ``counting``: settle the job it ran and claim
    the next, which the settle readied; what ``counting`` saw sent."""
    wd.enqueue("first", queue="q")
    wd.enqueue("next", queue="q")  # the settle readies it: the claim takes it
    store = WorkerStore("default")
    partition = Partition()
    running = store.claim(partition, worker_id="w")
    assert running.job is not None and running.claim_token is not None
    with counting() as sent:
        settled, claimed = store.settle(
            running.job.job_id,
            running.claim_token,
            DONE,
            claim_next=partition,
            worker_id="w",
            token=new_claim_token(),
        )
    assert settled.status == "settled" and settled.job is not None
    assert settled.job.outcome == "completed"
    assert claimed is not None and not isinstance(claimed, Exception)
    assert claimed.status == "claimed" and claimed.job is not None
    assert claimed.job.job_id == "next"
    return sent


def test_a_busy_default_worker_settles_and_claims_the_next_job_in_one_transaction() -> None:
    budget = _budget(SETTLE_AND_CLAIM)
    sent = settle_and_claim_next(exchanges)
    assert len(sent) == budget, sent
    assert commits(sent) == 1


def test_a_busy_default_worker_is_one_exchange_on_postgresql() -> None:
    """The worker settles and claims on outside any transaction: the queue's lock, the
    settle with its queue's next head and the claim go to the server together, one implicit
    transaction (psycopg's pipeline): no ``BEGIN``, no ``COMMIT``. Counted on the wire
    (libpq's trace): each Sync or simple query is one exchange."""
    sent = settle_and_claim_next(pipelined_messages)
    exchanges = [message for message in sent if message in ("Sync", "Query")]
    assert exchanges == ["Sync"], sent


@pytest.mark.parametrize(
    ("queue", "budget"),
    [("fresh", ENQUEUE_NEW_QUEUE), ("busy", ENQUEUE_EXISTING_QUEUE)],
    ids=["into a new queue", "into a queue with queued jobs"],
)
def test_one_enqueue_in_its_own_transaction(queue: str, budget: dict[str, int]) -> None:
    expected = _budget(budget)
    wd.enqueue("earlier", queue="busy")  # a queue with a queued job; "fresh" does not exist
    with exchanges() as sent, transaction.atomic():
        assert wd.enqueue("new", queue=queue).status == "queued"
    assert len(sent) == expected, sent
    assert commits(sent) == 1


@pytest.mark.parametrize("queue", ["fresh", "busy"], ids=["into a new queue", "into a busy one"])
def test_one_enqueue_inside_a_transaction_is_one_exchange_then_the_commit_on_postgresql(
    queue: str,
) -> None:
    """Inside ``atomic()`` the transaction's ``BEGIN`` goes with the enqueue's statements,
    and into a queue the connection has seen exist (the autocommit enqueue before), the
    queue's lock and the insert go together: one exchange, then the ``COMMIT``. Counted on
    the wire (libpq's trace): each Sync or simple query is one exchange."""
    wd.enqueue("earlier", queue="busy")
    with pipelined_messages() as sent, transaction.atomic():
        result = wd.enqueue("new", queue=queue)
    assert result.status == "queued"
    assert result.job.ready == (queue == "fresh")
    exchanges = [message for message in sent if message in ("Sync", "Query")]
    assert exchanges == ["Sync", "Query"], sent  # the exchange, COMMIT


@pytest.mark.parametrize("queue", ["fresh", "busy"], ids=["into a new queue", "into a busy one"])
def test_one_enqueue_in_autocommit_is_one_exchange_on_postgresql(queue: str) -> None:
    """Outside any transaction, the queue's lock and the insert go to the server together,
    one implicit transaction (psycopg's pipeline): no ``BEGIN``, no ``COMMIT``. Counted on
    the wire (libpq's trace): each Sync or simple query is one exchange."""
    wd.enqueue("earlier", queue="busy")
    with pipelined_messages() as sent:
        result = wd.enqueue("new", queue=queue)
    assert result.status == "queued"
    assert result.job.ready == (queue == "fresh")
    exchanges = [message for message in sent if message in ("Sync", "Query")]
    assert exchanges == ["Sync"], sent


@pytest.mark.parametrize("queue", ["fresh", "busy"], ids=["into a new queue", "into a busy one"])
def test_one_enqueue_in_autocommit_is_one_exchange_on_mariadb(queue: str) -> None:
    """Outside any transaction, one statement (a block with its own transaction): no
    ``BEGIN``, no ``COMMIT``, nor the ``SET autocommit`` Django sends around a transaction
    (which its query log does not record). Counted by the server: its session's
    ``Questions``, every statement a client sent (those run inside a block not counted)."""
    if connection.vendor != "mysql":
        pytest.skip("MariaDB's session status")
    wd.enqueue("earlier", queue="busy")
    before = _questions()
    with exchanges() as sent:
        result = wd.enqueue("new", queue=queue)
    assert _questions() - before - 1 == 1  # the second SHOW counts itself
    assert result.status == "queued"
    assert result.job.ready == (queue == "fresh")
    assert len(sent) == 1 and not commits(sent), sent


def _questions() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Questions'")
        (_, value) = cursor.fetchone()
    return int(value)


def test_an_idle_workers_claim_is_one_statement() -> None:
    budget = _budget(IDLE_CLAIM)
    wd.enqueue("elsewhere", queue="q", lane="other")  # ready, but not in the partition
    store = WorkerStore("default")
    with exchanges() as sent:
        result = store.claim(Partition(lanes=("mine",)), worker_id="w")
    assert result.status == "none"
    assert len(sent) == budget, sent


def test_a_heartbeat_is_one_statement() -> None:
    budget = _budget(HEARTBEAT)
    store = WorkerStore("default")
    store.register("w", started_at=timezone.now(), lanes=(), exclude_lanes=(), concurrency=1)
    with exchanges() as sent:
        assert store.heartbeat("w") is True
    assert len(sent) == budget, sent
    with exchanges() as sent:
        assert store.heartbeat("reaped") is False
    assert len(sent) == budget, sent
