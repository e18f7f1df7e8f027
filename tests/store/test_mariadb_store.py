"""The traps of the MySQL family, through the store on a real MariaDB: exact ids, 4-byte
UTF-8, JSON kept as text, microseconds, and a repeated enqueue while the first is
uncommitted (the race tests in ``test_races.py`` run here too)."""

from __future__ import annotations

import threading
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

import django_watchdog as wd
from django_watchdog.domain.errors import JobConflict
from django_watchdog.models import Job, Queue
from django_watchdog.store.dialects import dialect
from django_watchdog.store.store import Store

from .helpers import DONE, in_background

pytestmark = pytest.mark.mariadb_only


@pytest.mark.django_db
def test_ids_queues_and_lanes_compare_exactly() -> None:
    """A case- and accent-insensitive, PAD SPACE collation would make these one job."""
    names = ["A", "a", "a ", "á", "ä"]
    for name in names:
        assert wd.enqueue(name, queue=name).status == "queued"
    assert sorted(Job.objects.values_list("job_id", flat=True)) == sorted(names)
    for name in names:
        assert wd.queue_head(name).job_id == name
        assert wd.enqueue(name, queue=name).status == "duplicate"
    with pytest.raises(JobConflict):
        wd.enqueue("A", queue="a")


@pytest.mark.django_db
def test_four_byte_utf8_in_every_text_reads_back() -> None:
    text = "job-\U0001f600-\U00020000"
    payload = {"emoji": "\U0001f4a9", "nested": ["\U0001f600"]}
    wd.enqueue(text, queue=text, payload=payload)
    claim = Store().claim()
    assert claim.job is not None and claim.job.job_id == text and claim.job.queue == text
    assert claim.job.payload == payload
    Store().settle(text, claim.claim_token or "", DONE)
    assert wd.get_job(text).payload == payload  # type: ignore[union-attr]


@pytest.mark.django_db
def test_payload_identity_is_the_json_value_not_its_text() -> None:
    """MariaDB keeps JSON as text: a repeat with the keys in another order, or 1.0 for 1,
    is the same value (a duplicate), as on the other databases."""
    wd.enqueue("j", queue="q", payload={"a": 1, "b": [1, 2]})
    assert wd.enqueue("j", queue="q", payload={"b": [1.0, 2], "a": 1}).status == "duplicate"
    with pytest.raises(JobConflict) as conflict:
        wd.enqueue("j", queue="q", payload={"a": 1, "b": [2, 1]})
    assert "payload" in str(conflict.value)


@pytest.mark.django_db
def test_timestamps_keep_microseconds() -> None:
    run_after = datetime(2030, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    wd.enqueue("later", queue="q", run_after=run_after)
    wd.enqueue("now", queue="q2")
    assert wd.get_job("later").run_after == run_after  # type: ignore[union-attr]
    claim = Store().claim()
    assert claim.job is not None
    stored = Job.objects.get(job_id="now")
    assert stored.started_at == claim.job.started_at
    assert stored.enqueued_at is not None and stored.started_at is not None
    assert stored.started_at - stored.enqueued_at < timedelta(minutes=5)
    assert Store().next_due() == run_after


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("queue", "commit", "expected"),
    [
        ("q1", True, "duplicate"),  # waits on the queue's lock, then finds the row
        ("q2", True, "conflict"),  # waits on the job id's unique entry, then 1062
        ("q2", False, "queued"),  # the first rolled back: the repeat inserts
    ],
)
def test_a_repeat_while_the_first_is_uncommitted_never_writes_a_second_row(
    queue: str, commit: bool, expected: str
) -> None:
    entered, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    outcome: list[str] = []

    class RolledBack(Exception):
        pass

    def first() -> None:
        try:
            with transaction.atomic():
                wd.enqueue("x", queue="q1")
                entered.set()
                assert release.wait(30), "the test never released the first enqueue"
                if not commit:
                    raise RolledBack
        except RolledBack:
            pass

    def second() -> None:
        assert entered.wait(30)
        try:
            outcome.append(wd.enqueue("x", queue=queue).status)
        except JobConflict:
            outcome.append("conflict")

    threads = [in_background(first, errors), in_background(second, errors)]
    try:
        assert entered.wait(30)
        _until_another_session_waits()
    finally:
        release.set()
        for thread in threads:
            thread.join(timeout=60)
    assert not errors, errors
    assert outcome == [expected]
    assert Job.objects.filter(job_id="x").count() == 1
    assert Job.objects.get(job_id="x").queue == ("q1" if commit else queue)


def _until_another_session_waits() -> None:
    """Until a statement of another session of this database is in flight (the second
    enqueue, blocked: the first sits idle in its transaction)."""
    waiting = threading.Event()
    for _ in range(3000):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM information_schema.processlist WHERE db = DATABASE()"
                " AND command = 'Query' AND id <> CONNECTION_ID()"
            )
            if cursor.fetchone()[0]:
                return
        waiting.wait(0.01)  # polling for the wait, with a deadline
    raise AssertionError("the repeat never waited for the first enqueue")


@pytest.mark.django_db(transaction=True)
def test_a_row_inserted_without_the_id_sequence_does_not_block_later_enqueues() -> None:
    """A job row written by hand (SQL, a fixture, a bulk load) takes an ``AUTO_INCREMENT``
    id the sequence has not given; when the sequence reaches it, the enqueue moves the
    sequence past every stored id and inserts, instead of failing on the primary key."""
    wd.enqueue("first", queue="q")
    first = Job.objects.get(job_id="first")
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO watchdog_job (id, job_id, queue, lane, priority, state, outcome,"
            " recovery_count, attempts, enqueued_at, settled_at, position, `delayed`, ready)"
            " SELECT id + n, CONCAT('by-hand-', n), 'elsewhere', 'default', 0, 'settled',"
            " 'completed', 0, 0, enqueued_at, enqueued_at, id + n, FALSE, FALSE"
            " FROM watchdog_job, (SELECT seq AS n FROM seq_1_to_3) AS s WHERE job_id = 'first'"
        )
    for n in range(5):
        wd.enqueue(f"later-{n}", queue="q")
    later = Job.objects.filter(job_id__startswith="later-").order_by("position")
    assert [job.job_id for job in later] == [f"later-{n}" for n in range(5)]
    assert min(job.id for job in later) > first.id + 3


@pytest.mark.django_db(transaction=True)
def test_a_repeat_inside_the_callers_transaction_undoes_only_its_own_block() -> None:
    """One job is one block under a savepoint of its own: a taken id rolls the block back
    to it (the queue it created goes), the caller's earlier writes stay, the steps answer
    the repeat, and the caller's transaction goes on."""
    wd.enqueue("j", queue="q")
    with transaction.atomic():
        wd.enqueue("mine", queue="mine")
        with pytest.raises(JobConflict):
            wd.enqueue("j", queue="fresh")
        assert wd.enqueue("j", queue="q").status == "duplicate"
        assert wd.enqueue("after", queue="mine").job.ready is False
    assert not Queue.objects.filter(name="fresh").exists()
    mine = Job.objects.filter(queue="mine").order_by("position")
    assert [(job.job_id, job.ready) for job in mine] == [("mine", True), ("after", False)]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("alone", [True, False], ids=["in autocommit", "in a transaction"])
def test_a_job_that_outranks_the_ready_head_takes_its_place_in_one_block(alone: bool) -> None:
    """The block's own head rule: the new job becomes the head and the old head loses its
    ready flag; a job that does not outrank it, or is delayed, leaves it ready."""
    wd.enqueue("old", queue="q")
    later = datetime.now(UTC) + timedelta(hours=1)
    with transaction.atomic() if not alone else nullcontext():
        assert wd.enqueue("same", queue="q").job.ready is False
        assert wd.enqueue("delayed", queue="q", priority=9, run_after=later).job.ready is False
        assert wd.enqueue("urgent", queue="q", priority=5).job.ready is True
    ready = Job.objects.filter(queue="q", ready=True).values_list("job_id", flat=True)
    assert list(ready) == ["urgent"]
    assert wd.queue_head("q").job_id == "urgent"


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_calls_the_procedure_and_sends_the_block_where_it_is_missing() -> None:
    """Migration 0015's procedure runs the one-job enqueue; on a connection where it is
    missing (a dump without routines, tables built from the models), the same block is
    sent instead, with the same results, in autocommit and in a transaction."""
    from importlib import import_module

    from django.db.migrations.executor import MigrationExecutor
    from django.test.utils import CaptureQueriesContext

    migration = import_module("django_watchdog.migrations.0015_mariadb_enter_job")
    with CaptureQueriesContext(connection) as captured:
        assert wd.enqueue("called", queue="q").job.ready is True
    assert [q["sql"].split()[0] for q in captured.captured_queries] == ["CALL"]
    with connection.cursor() as cursor:
        cursor.execute(f"DROP PROCEDURE {migration.NAME}")
    try:
        connection.close()  # a new connection asks for the procedure again
        with CaptureQueriesContext(connection) as captured:
            assert wd.enqueue("sent", queue="q").job.ready is False
            with transaction.atomic():
                assert wd.enqueue("fresh", queue="fresh").job.ready is True
                assert wd.enqueue("urgent", queue="q", priority=5).job.ready is True
        sent = [" ".join(str(q["sql"]).split()) for q in captured.captured_queries]
        blocks = [text for text in sent if text.startswith("BEGIN NOT ATOMIC")]
        # The failed CALL (logged without its text), then blocks only; BEGIN and COMMIT.
        assert len(blocks) == 3 and len(sent) == 6, sent
        assert not any(text.startswith("CALL") for text in sent), sent
    finally:
        with connection.schema_editor() as editor:
            migration.forwards(MigrationExecutor(connection).loader.project_state().apps, editor)
        connection.close()
    ready = Job.objects.filter(ready=True).order_by("job_id").values_list("job_id", flat=True)
    assert list(ready) == ["fresh", "urgent"]


#: Texts that JSON, SQL or the driver's quoting treat specially.
AWKWARD = [
    'q"uote',
    "back\\slash",
    "apo'strophe",
    "per%(cent)s",
    "tab\tnew\nline\x01",
    "\U0001f600",
]


@pytest.mark.django_db
def test_a_batch_stores_every_text_as_sent() -> None:
    """A batch goes to the server as one JSON document per statement: each text, in ids,
    queue names (created by the batch and existing), lanes and payloads, reads back as
    sent."""
    wd.enqueue("first", queue=AWKWARD[0])  # one queue exists, the others the batch creates
    wd.enqueue_many(
        {"job_id": f"{text}-{n}", "queue": text, "payload": {text: [text, n]}}
        for n, text in enumerate(AWKWARD)
    )
    wd.enqueue_many(
        [{"job_id": "h" * 256, "queue": "q" * 256, "lane": "l" * 64}, {"job_id": "x", "queue": "y"}]
    )
    for n, text in enumerate(AWKWARD):
        job = wd.get_job(f"{text}-{n}")
        assert job is not None and job.queue == text and job.payload == {text: [text, n]}
    assert set(Queue.objects.values_list("name", flat=True)) == {*AWKWARD, "q" * 256, "y"}
    long = wd.get_job("h" * 256)
    assert long is not None and long.queue == "q" * 256 and long.lane == "l" * 64


@pytest.mark.django_db(transaction=True)
def test_a_batch_is_inserted_a_bounded_number_of_rows_at_a_time_in_batch_order() -> None:
    """An ``INSERT … SELECT`` holds the table's ``AUTO_INCREMENT`` lock to its end, which
    other sessions' inserts wait for: a batch goes in statements of at most
    ``ROWS_PER_INSERT`` rows, and its jobs still take ids, and places in their queues'
    order, in batch order."""
    from django.test.utils import CaptureQueriesContext

    from django_watchdog.store.dialects.mariadb_enqueue import ROWS_PER_INSERT

    count = 2 * ROWS_PER_INSERT + 1
    with CaptureQueriesContext(connection) as captured:
        wd.enqueue_many(
            {"job_id": f"j{n}", "queue": f"q{n % 3}", "priority": n % 2} for n in range(count)
        )
    inserts = [q["sql"] for q in captured.captured_queries if "INTO watchdog_job" in q["sql"]]
    assert len(inserts) == 3
    rows = list(Job.objects.values_list("job_id", "id", "position"))
    assert [job_id for job_id, _, _ in sorted(rows, key=lambda row: row[1])] == [
        f"j{n}" for n in range(count)
    ]
    assert all(pk == position for _, pk, position in rows)


@pytest.mark.django_db(transaction=True)
def test_holding_queues_locks_exactly_the_named_ones_that_exist_in_one_statement() -> None:
    """``hold_queues`` sends the names as one JSON document, not a parameter each: they
    still compare byte for byte, every existing one named is locked, and no other."""
    existing = ["A", "a ", "q'\\\"", "q-\U0001f600", "not-named"]
    for name in existing:
        wd.enqueue(f"job-{name}", queue=name)
    asked = ["a", "A", "a ", "\u00e1", "q'\\\"", "q-\U0001f600", "missing"]
    other = connection.get_new_connection(connection.get_connection_params())
    try:
        with transaction.atomic(), CaptureQueriesContext(connection) as sent:
            held = dialect("default").hold_queues(asked)
            locked = [name for name in existing if _locked_elsewhere(other, name)]
        assert held == {"A", "a ", "q'\\\"", "q-\U0001f600"}
        assert locked == ["A", "a ", "q'\\\"", "q-\U0001f600"]
        assert len(sent.captured_queries) == 1
    finally:
        other.close()


def _locked_elsewhere(other: object, queue: str) -> bool:
    """Whether another connection finds the queue's row locked (``NOWAIT``: error 1205)."""
    cursor = other.cursor()  # type: ignore[attr-defined]
    try:
        cursor.execute("SELECT name FROM watchdog_queue WHERE name = %s FOR UPDATE NOWAIT", [queue])
    except Exception as error:  # the driver's own error class
        if error.args[0] != 1205:
            raise
        return True
    finally:
        cursor.close()
        other.rollback()  # type: ignore[attr-defined]
    return False
