"""The dialects: statements the store runs, named in one module per database."""

from __future__ import annotations

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
