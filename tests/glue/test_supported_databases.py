"""A database watchdog does not run on is refused by ``manage.py check`` and by the worker,
with a message saying what is supported; the supported ones pass (on the real database)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connection, connections

from django_watchdog import supported_databases
from django_watchdog.checks import check_database

pytestmark = pytest.mark.django_db


def test_the_test_database_passes() -> None:
    assert check_database(databases=["default"]) == []
    assert supported_databases.refusal("default", connect=True) is None


def test_the_message_names_mariadb_and_refuses_mysql() -> None:
    floor = ".".join(map(str, supported_databases.mariadb_minimum()))
    assert supported_databases.mariadb_minimum() >= (10, 6)
    assert f"MariaDB {floor}+" in supported_databases.supported()
    assert "not MySQL" in supported_databases.supported()


@pytest.mark.mariadb_only
def test_a_plain_check_passes_a_mariadb_alias_at_read_committed() -> None:
    assert check_database() == []


@pytest.mark.mariadb_only
def test_mariadb_without_read_committed_is_refused_saying_what_is_needed() -> None:
    options = {**connection.settings_dict["OPTIONS"]}
    del options["isolation_level"]
    with _options(options):
        [error] = check_database()
    assert error.id == "django_watchdog.E016"
    assert error.msg == (
        "DATABASES['default'] has OPTIONS['isolation_level'] not set (REPEATABLE READ); "
        "watchdog needs 'read committed' on MariaDB. "
        f"Supported: {supported_databases.supported()}."
    )


@pytest.mark.mariadb_only
@pytest.mark.parametrize(
    ("mariadb", "version", "why"),
    [
        (False, (8, 4, 3), "is MySQL 8.4.3, which watchdog does not support"),
        (True, (10, 5, 20), "is MariaDB 10.5.20; watchdog needs"),
    ],
)
def test_mysql_and_an_older_mariadb_are_refused_by_the_check_and_the_worker(
    monkeypatch: pytest.MonkeyPatch, mariadb: bool, version: tuple[int, ...], why: str
) -> None:
    """MySQL cannot be tested here: the server kind and version the backend reads are
    replaced, as Django caches them per connection."""
    wrapper = connections["default"]  # not the proxy ``connection``
    monkeypatch.setitem(wrapper.__dict__, "mysql_is_mariadb", mariadb)
    monkeypatch.setitem(wrapper.__dict__, "mysql_version", version)
    [error] = check_database(databases=["default"])
    assert error.id == "django_watchdog.E016"
    assert f"DATABASES['default'] {why}" in error.msg
    assert error.msg.endswith(f"Supported: {supported_databases.supported()}.")
    with pytest.raises(CommandError) as refused:
        call_command("watchdog_worker", "--burst")
    assert str(refused.value) == error.msg


@contextmanager
def _options(options: dict[str, Any]) -> Iterator[None]:
    saved = connection.settings_dict["OPTIONS"]
    connection.settings_dict["OPTIONS"] = options
    try:
        yield
    finally:
        connection.settings_dict["OPTIONS"] = saved


@pytest.mark.mariadb_only
def test_django_warns_nothing_about_watchdogs_models_on_mariadb() -> None:
    """Partial indexes, conditional unique constraints and 256-character unique keys have
    their MariaDB form in migration 0009: Django's warnings about them are left out."""
    from django.apps import apps
    from django.core import checks

    models = set(apps.get_app_config("django_watchdog").get_models())
    messages = checks.run_checks(databases=["default"], include_deployment_checks=False)
    about_watchdog = [m for m in messages if getattr(m.obj, "model", m.obj) in models]
    assert about_watchdog == []
