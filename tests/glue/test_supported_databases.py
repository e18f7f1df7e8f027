"""A database watchdog does not run on is refused by ``manage.py check`` and by the worker,
with a message saying what is supported; the supported ones pass (on the real database)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from django_watchdog import supported_databases
from django_watchdog.checks import check_database

pytestmark = pytest.mark.django_db


def test_the_test_database_passes_unless_it_is_mariadb() -> None:
    if connection.vendor == "mysql":
        pytest.skip("MariaDB is refused until its dialect lands (the test below)")
    assert check_database(databases=["default"]) == []
    assert supported_databases.refusal("default", connect=True) is None


@pytest.mark.mariadb_only
def test_mariadb_is_refused_by_the_check_saying_what_is_supported() -> None:
    errors = check_database(databases=["default"])
    assert [error.id for error in errors] == ["django_watchdog.E016"]
    version = ".".join(map(str, connection.mysql_version))
    assert errors[0].msg == (
        f"DATABASES['default'] is MariaDB {version}: MariaDB support is in progress. "
        f"Supported: {supported_databases.supported()}."
    )


@pytest.mark.mariadb_only
def test_a_plain_check_refuses_the_mysql_backend_without_connecting() -> None:
    [error] = check_database()
    assert error.id == "django_watchdog.E016"
    assert "MySQL is not supported and MariaDB support is in progress" in error.msg


@pytest.mark.mariadb_only
def test_the_worker_refuses_to_start_on_mariadb_with_the_same_message() -> None:
    with pytest.raises(CommandError) as refused:
        call_command("watchdog_worker", "--burst")
    assert str(refused.value) == check_database(databases=["default"])[0].msg
