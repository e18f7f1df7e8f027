"""The dialects: statements the store runs, named in one module per database."""

from __future__ import annotations

import contextlib

import pytest
from django.db import connection

from django_watchdog.store import rows
from django_watchdog.store.dialects import DIALECTS, dialect
from django_watchdog.store.dialects.common import JOB_COLUMNS


def test_the_job_columns_statements_return_are_the_models_fields_in_order() -> None:
    assert JOB_COLUMNS == tuple(column for _, column in rows.job_fields())


@pytest.mark.django_db
def test_the_database_under_test_has_a_dialect_bound_to_its_alias() -> None:
    assert connection.vendor in DIALECTS
    assert dialect("default").using == "default"
    assert dialect("default").vendor == connection.vendor


postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="PostgreSQL keeps a driver cursor per statement"
)


@postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_statement_runs_again_on_its_kept_cursor_and_after_a_reconnect_on_a_new_one() -> None:
    d = dialect("default")
    if not d.fast_path():
        pytest.skip("behind a transaction pooler statements run on Django's cursor, kept by none")
    sql = "SELECT %(n)s::int, now()"
    assert d.fetch(sql, {"n": 1})[0][0] == 1
    kept = connection._watchdog_cursors  # type: ignore[attr-defined]
    first = kept.cursors[sql]
    assert d.fetch(sql, {"n": 2})[0][0] == 2
    assert kept.cursors[sql] is first  # its loaders were kept: none built for this row

    connection.close()
    assert d.fetch(sql, {"n": 3})[0][0] == 3
    again = connection._watchdog_cursors  # type: ignore[attr-defined]
    assert again is not kept and again.raw is connection.connection
    assert again.cursors[sql] is not first


def test_sqlite_statements_go_to_the_driver_with_positional_parameters() -> None:
    from django_watchdog.store.dialects.sqlite import positional_style

    sql = "SELECT %(a)s, %(b)s, %(a)s, strftime('%%Y', 'now') LIKE '20%%'"
    assert positional_style(sql) == (
        "SELECT ?, ?, ?, strftime('%Y', 'now') LIKE '20%'",
        ("a", "b", "a"),
    )


sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="SQLite's binding of parameters by name"
)


class _RecordingCursor:
    """A driver cursor that notes what it was asked to execute."""

    def __init__(self, cursor: object, seen: list[tuple[str, object]]) -> None:
        self.cursor, self.seen = cursor, seen

    def execute(self, sql: str, params: object) -> object:
        self.seen.append((sql, params))
        return self.cursor.execute(sql, params)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.cursor, name)


@sqlite_only
@pytest.mark.django_db
def test_a_sqlite_statement_of_many_rows_is_bound_by_position(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SQLite finds a named parameter's name by a walk of the statement's list of names: a
    # statement of n names bound by name costs n squared (100 jobs, 1,300 names: 40 times
    # the time by position). The store binds every statement by position.
    d = dialect("default")
    seen: list[tuple[str, object]] = []
    kept = d.driver_cursor

    def recording(connection: object, sql: str):  # type: ignore[no-untyped-def]
        with kept(connection, sql) as raw:
            yield _RecordingCursor(raw, seen)

    monkeypatch.setattr(d, "driver_cursor", contextlib.contextmanager(recording))
    monkeypatch.setattr(type(d), "fast_path", lambda self: True)
    rows = d.fetch_rows(
        lambda count: (
            "SELECT "
            + " UNION ALL SELECT ".join(
                f"%(n_{k})s, %(n_{k})s || '%%', %(tag)s" for k in range(count)
            )
        ),
        ["n"],
        [(str(k),) for k in range(300)],
        {"tag": "t"},
    )
    assert rows == [(str(k), f"{k}%", "t") for k in range(300)]
    assert seen and all(isinstance(params, list | tuple) and ":" not in sql for sql, params in seen)
