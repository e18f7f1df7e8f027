"""PostgreSQL's one-exchange statements sent straight on libpq's pipeline (``Exchange``):
what they answer when a statement fails, when the server forgot their prepared forms,
when the connection dies under them, and from a thread that did not open the connection."""

from __future__ import annotations

import threading

import psycopg
import pytest
from django.db import DatabaseError, OperationalError, connection, transaction

from django_watchdog.store.dialects import dialect, postgres
from django_watchdog.store.dialects.postgres import kept_cursors
from django_watchdog.store.dialects.postgres_exchange import Exchange

from .helpers import pipelined_messages

pytestmark = pytest.mark.django_db(transaction=True)

ONE = ("SELECT %(n)s::int AS n", {"n": 1})
TWO = ("SELECT %(n)s::int + 1 AS n, %(tag)s::text AS tag", {"n": 1, "tag": "x"})


@pytest.fixture(autouse=True)
def exchanged() -> None:
    """Skips unless this connection's statements go together on an ``Exchange``."""
    if connection.vendor != "postgresql" or not dialect("default").pipelined():
        pytest.skip("PostgreSQL, not behind a transaction pooler")
    assert dialect("default").exchange() is not None


def together(*statements: tuple[str, dict[str, object]]) -> list[list[tuple[object, ...]]]:
    return dialect("default").fetch_together(list(statements))


def test_each_statement_answers_its_rows_in_order() -> None:
    assert together(ONE, TWO, ("SELECT 1 WHERE FALSE", {})) == [[(1,)], [(2, "x")], []]


def test_a_statement_is_prepared_once_and_run_by_name_after() -> None:
    together(ONE, TWO)
    with pipelined_messages() as messages:
        assert together(ONE, TWO) == [[(1,)], [(2, "x")]]
    assert "Parse" not in messages, messages
    assert messages.count("Bind") == 2 and messages.count("Sync") == 1, messages


def test_its_plans_are_made_afresh_as_the_cursors_are() -> None:
    """Plans ``REPLAN_SECONDS`` old are dropped before the exchange (``DISCARD PLANS``, a
    simple query), as before a kept cursor's statement."""
    together(ONE, TWO)
    kept_cursors(connection).planned_at -= postgres.REPLAN_SECONDS
    with pipelined_messages() as messages:
        assert together(ONE, TWO) == [[(1,)], [(2, "x")]]
    assert [m for m in messages if m in ("Query", "Sync")] == ["Query", "Sync"], messages
    with pipelined_messages() as messages:
        together(ONE, TWO)
    assert "Query" not in messages, messages


def test_a_failing_statement_undoes_the_exchange_and_leaves_the_connection_usable() -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE written (n int)")
    insert = ("INSERT INTO written VALUES (%(n)s) RETURNING n", {"n": 7})
    with pytest.raises(DatabaseError, match="division by zero"):
        together(insert, ("SELECT 1 / %(zero)s::int", {"zero": 0}), ONE)
    assert together(("SELECT count(*) FROM written", {}), ONE) == [[(0,)], [(1,)]]


def test_statements_the_server_forgot_are_prepared_again() -> None:
    together(ONE, TWO)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    assert together(ONE, TWO) == [[(1,)], [(2, "x")]]


def test_a_connection_that_dies_under_it_is_closed_and_the_next_statement_reconnects() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (pid,) = cursor.fetchone()
    with psycopg.connect(**dialect("default").listen_params(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [pid])
    with pytest.raises(OperationalError):
        together(ONE, TWO)
    connection.close_if_unusable_or_obsolete()
    assert together(ONE, TWO) == [[(1,)], [(2, "x")]]


def test_an_exchange_runs_only_in_the_thread_that_opened_it() -> None:
    """Another thread sharing the connection (Django's live server) takes the cursors'
    way, which psycopg's lock keeps apart."""
    exchange = dialect("default").exchange()
    assert isinstance(exchange, Exchange)
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(exchange.usable()))
    thread.start()
    thread.join()
    assert seen == [False]
    assert exchange.usable()


def test_inside_a_transaction_not_yet_begun_it_begins_it_in_the_same_exchange() -> None:
    """Inside ``atomic()`` before its first statement the connection's status says idle
    (psycopg sends the ``BEGIN`` with that statement): the exchange sends it first, and its
    statements are undone with the block."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE written (n int)")
    insert = ("INSERT INTO written VALUES (%(n)s) RETURNING n", {"n": 1})
    with transaction.atomic():
        with pipelined_messages() as messages:
            assert together(insert, ONE) == [[(1,)], [(1,)]]
        assert together(("SELECT count(*) FROM written", {})) == [[(1,)]]
        transaction.set_rollback(True)
    assert [m for m in messages if m in ("Sync", "Query")] == ["Sync"], messages
    assert together(("SELECT count(*) FROM written", {})) == [[(0,)]]


def test_inside_a_transaction_under_way_its_statements_take_the_cursors_way() -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE written (n int)")
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO written VALUES (1)")
        assert dialect("default").exchange() is None
        assert together(("SELECT count(*) FROM written", {}), ONE) == [[(1,)], [(1,)]]
        transaction.set_rollback(True)
    assert together(("SELECT count(*) FROM written", {})) == [[(0,)]]


def test_statements_psycopg_deallocated_in_a_transaction_under_way_do_not_fail_it() -> None:
    """psycopg deallocates every prepared statement on a rollback, a savepoint's too (it
    holds names of its own once a kept cursor prepared one): a transaction that goes on
    after such a rollback still runs its statements."""
    d = dialect("default")
    together(ONE, TWO)
    with transaction.atomic():
        assert d.fetch("SELECT 1") == [(1,)]  # a kept cursor: psycopg prepares it
        with pytest.raises(DatabaseError), transaction.atomic():
            d.fetch("SELECT 1 / 0")
        assert together(ONE, TWO) == [[(1,)], [(2, "x")]]
        assert d.fetch_in_turn([ONE, TWO]) == [[(1,)], [(2, "x")]]
    assert together(ONE, TWO) == [[(1,)], [(2, "x")]]


def test_the_transaction_it_begins_is_the_one_psycopg_would_begin() -> None:
    """The connection's isolation level, read only and deferrable settings are the
    ``BEGIN``'s, as on psycopg's own."""
    raw = connection.connection
    before = raw.isolation_level
    raw.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
    try:
        with transaction.atomic():
            isolation = ("SELECT current_setting('transaction_isolation')", {})
            assert together(isolation) == [[("serializable",)]]
    finally:
        raw.isolation_level = before


def test_a_failing_statement_aborts_the_transaction_and_the_block_rolls_it_back() -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE written (n int)")
    insert = ("INSERT INTO written VALUES (%(n)s) RETURNING n", {"n": 7})
    with pytest.raises(DatabaseError, match="division by zero"), transaction.atomic():
        together(insert, ("SELECT 1 / %(zero)s::int", {"zero": 0}), ONE)
    assert together(("SELECT count(*) FROM written", {}), ONE) == [[(0,)], [(1,)]]


def test_statements_the_server_forgot_are_prepared_again_in_a_transaction_they_begin() -> None:
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE written (n int)")
    insert = ("INSERT INTO written VALUES (%(n)s) RETURNING n", {"n": 7})
    together(ONE, TWO)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    with transaction.atomic():
        assert together(insert, ONE, TWO) == [[(7,)], [(1,)], [(2, "x")]]
        transaction.set_rollback(True)
    assert together(("SELECT count(*) FROM written", {})) == [[(0,)]]
