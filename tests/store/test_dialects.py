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
