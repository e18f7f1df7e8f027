"""System checks of the WATCHDOG setting: each bad value names its check id."""

from datetime import timedelta

import pytest
from django.test import override_settings

from django_watchdog import checks, supported_databases
from django_watchdog.checks import check_operations, check_settings


def ids(watchdog):
    with override_settings(WATCHDOG=watchdog):
        return [message.id for message in check_settings()]


def test_defaults_and_an_absent_setting_pass():
    assert ids({}) == []
    with override_settings():
        from django.conf import settings

        del settings.WATCHDOG
        assert check_settings() == []


@pytest.mark.parametrize(
    ("watchdog", "expected"),
    [
        ([("BATCH", 2)], "django_watchdog.E001"),
        ({"BACH": 2}, "django_watchdog.E002"),
        ({"POLL_INTERVAL": 0}, "django_watchdog.E003"),
        ({"SHUTDOWN_GRACE": "30"}, "django_watchdog.E003"),
        ({"MAX_PAYLOAD_BYTES": 1.5}, "django_watchdog.E004"),
        ({"HEARTBEAT_INTERVAL": 10.0, "WORKER_TIMEOUT": 15.0}, "django_watchdog.E005"),
        ({"BATCH": 0}, "django_watchdog.E006"),
        ({"BATCH": 501}, "django_watchdog.E006"),
        ({"BATCH": True}, "django_watchdog.E006"),
        ({"BATCH": 4.0}, "django_watchdog.E006"),
        ({"LOCK_TIMEOUT": None}, "django_watchdog.E014"),
        ({"LOCK_TIMEOUT": 0}, "django_watchdog.E014"),
        ({"IDLE_IN_TRANSACTION_TIMEOUT": 0}, "django_watchdog.E014"),
        ({"IDLE_IN_TRANSACTION_TIMEOUT": float("nan")}, "django_watchdog.E014"),
        ({"TCP_KEEPALIVES_IDLE": "30"}, "django_watchdog.E014"),
        ({"TCP_KEEPALIVES_COUNT": True}, "django_watchdog.E014"),
        ({"TCP_USER_TIMEOUT": float("inf")}, "django_watchdog.E014"),
        ({"TCP_USER_TIMEOUT": 10**7}, "django_watchdog.E014"),
    ],
)
def test_a_bad_value_is_reported_by_id(watchdog, expected):
    assert ids(watchdog) == [expected]


def test_worker_connection_settings_may_be_left_to_the_server():
    assert ids({name: None for name in checks.SESSION_SETTINGS}) == []
    assert ids({"LOCK_TIMEOUT": 0.05, "TCP_KEEPALIVES_COUNT": 9}) == []


def test_good_batches_pass():
    assert ids({"BATCH": 1}) == ids({"BATCH": 500}) == []


SQLITE = {
    "ENGINE": "django.db.backends.sqlite3",
    "NAME": "x.sqlite3",
    "OPTIONS": {
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL;",
    },
}


# The check only reads DATABASES; no connection is opened under the override.
only_reads_databases = pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")


@only_reads_databases
@pytest.mark.parametrize(
    ("version", "expected"), [((3, 34, 1), ["django_watchdog.E012"]), ((3, 35, 0), [])]
)
def test_an_old_sqlite_library_is_an_error(monkeypatch, version, expected):
    monkeypatch.setattr(supported_databases, "SQLITE_VERSION", version)
    with override_settings(DATABASES={"default": SQLITE}):
        assert [message.id for message in checks.check_sqlite()] == expected


@only_reads_databases
def test_the_sqlite_version_does_not_matter_without_sqlite(monkeypatch):
    monkeypatch.setattr(supported_databases, "SQLITE_VERSION", (3, 20, 0))
    postgres = {"ENGINE": "django.db.backends.postgresql", "NAME": "x"}
    with override_settings(DATABASES={"default": postgres}):
        assert checks.check_sqlite() == []


@pytest.mark.parametrize(
    ("watchdog", "expected"),
    [
        ({"ID_RETENTION": 3600}, []),
        ({"RETENTION": 3600, "ID_RETENTION": timedelta(days=30)}, []),
        ({"ID_RETENTION": 0}, ["django_watchdog.E013"]),
        ({"ID_RETENTION": "30d"}, ["django_watchdog.E013"]),
        ({"ID_RETENTION": True}, ["django_watchdog.E013"]),
        ({"RETENTION": 7200, "ID_RETENTION": 3600}, ["django_watchdog.E013"]),
        ({"ID_RETENTION": float("inf")}, ["django_watchdog.E013"]),
        ({"ID_RETENTION": 1e12}, ["django_watchdog.E013"]),
        ({"ID_RETENTION": timedelta(days=10**6)}, ["django_watchdog.E013"]),
    ],
)
def test_id_retention_is_a_period_no_shorter_than_retention(watchdog, expected):
    with override_settings(WATCHDOG=watchdog):
        assert [message.id for message in check_operations()] == expected


SECONDS_SETTINGS = (
    "POLL_INTERVAL",
    "HEARTBEAT_INTERVAL",
    "WORKER_TIMEOUT",
    "SHUTDOWN_GRACE",
    "TIMEOUT_GRACE",
)


@pytest.mark.parametrize("name", SECONDS_SETTINGS)
@pytest.mark.parametrize(
    "value", [float("nan"), float("inf"), -1.0, 1e12, pytest.param(10**400, id="10**400")]
)
def test_a_number_of_seconds_must_be_finite_and_bounded(name, value):
    with override_settings(WATCHDOG={name: value}):
        messages = check_settings()
    assert [message.id for message in messages] == ["django_watchdog.E003"]
    assert f"WATCHDOG[{name!r}]" in messages[0].msg


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        -5,
        0,
        1e12,
        pytest.param(10**400, id="10**400"),
        timedelta(days=10**6),
        timedelta(0),
    ],
)
def test_retention_must_be_a_positive_bounded_age(value):
    with override_settings(WATCHDOG={"RETENTION": value}):
        messages = checks.check_operations()
    assert [message.id for message in messages] == ["django_watchdog.E010"]
    assert "WATCHDOG['RETENTION']" in messages[0].msg


@pytest.mark.parametrize("value", [None, 1, 86400.0 * 365 * 100, timedelta(days=30)])
def test_good_retention_passes(value):
    with override_settings(WATCHDOG={"RETENTION": value}):
        assert checks.check_operations() == []


@pytest.mark.parametrize("value", [float("nan"), 1e12, -1])
def test_reading_a_bad_retention_at_run_time_names_the_setting(value):
    from django.core.exceptions import ImproperlyConfigured

    from django_watchdog.engine.housekeeping import retention

    with override_settings(WATCHDOG={"RETENTION": value}):
        with pytest.raises(ImproperlyConfigured, match=r"WATCHDOG\['RETENTION'\]"):
            retention()


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 0, 1e12])
def test_reading_a_bad_timing_at_run_time_names_the_setting(value):
    from django.core.exceptions import ImproperlyConfigured

    from django_watchdog.engine.worker import WorkerOptions

    with override_settings(WATCHDOG={"POLL_INTERVAL": value}):
        with pytest.raises(ImproperlyConfigured, match=r"WATCHDOG\['POLL_INTERVAL'\]"):
            WorkerOptions().timing("poll_interval")


@pytest.mark.parametrize("value", [float("inf"), 1e12, timedelta(days=10**6)])
def test_reading_a_bad_id_retention_at_run_time_names_the_setting(value):
    from django.core.exceptions import ImproperlyConfigured

    from django_watchdog.store.pruned_ids import window

    with override_settings(WATCHDOG={"ID_RETENTION": value}):
        with pytest.raises(ImproperlyConfigured, match=r"WATCHDOG\['ID_RETENTION'\]"):
            window()


POSTGRES = {"ENGINE": "django.db.backends.postgresql", "NAME": "app", "HOST": "db", "PORT": "5432"}
POOLED = {**POSTGRES, "PORT": "6432", "DISABLE_SERVER_SIDE_CURSORS": True}


def pooler_ids(watchdog, databases):
    from django_watchdog.pooler import check_pooler

    with override_settings(WATCHDOG=watchdog, DATABASES=databases):
        return [message.id for message in check_pooler()]


@only_reads_databases
@pytest.mark.parametrize(
    ("watchdog", "databases", "expected"),
    [
        ({}, {"default": POSTGRES}, []),
        # Declared, with a direct connection for LISTEN: nothing to say.
        (
            {"TRANSACTION_POOLER": True, "LISTEN_DATABASE": "direct"},
            {"default": POOLED, "direct": POSTGRES},
            [],
        ),
        ({"TRANSACTION_POOLER": "yes"}, {"default": POOLED}, ["django_watchdog.E015"]),
        ({"PREPARED_STATEMENTS": "no"}, {"default": POOLED}, ["django_watchdog.E015"]),
        ({"LISTEN_DATABASE": "nowhere"}, {"default": POSTGRES}, ["django_watchdog.E015"]),
        # No direct connection: workers poll.
        ({"TRANSACTION_POOLER": True}, {"default": POOLED}, ["django_watchdog.W004"]),
        # LISTEN configured through the pooler itself.
        (
            {"TRANSACTION_POOLER": True, "LISTEN_DATABASE": "listen"},
            {"default": POOLED, "listen": {**POOLED, "NAME": "app"}},
            ["django_watchdog.W005"],
        ),
        (
            {"TRANSACTION_POOLER": True, "LISTEN_DATABASE": "direct"},
            {"default": {**POOLED, "DISABLE_SERVER_SIDE_CURSORS": False}, "direct": POSTGRES},
            ["django_watchdog.W006"],
        ),
        (
            {"TRANSACTION_POOLER": True, "LISTEN_DATABASE": "direct"},
            {"default": {**POOLED, "OPTIONS": {"prepare_threshold": 5}}, "direct": POSTGRES},
            ["django_watchdog.W007"],
        ),
        (
            {"TRANSACTION_POOLER": True, "LISTEN_DATABASE": "direct", "PREPARED_STATEMENTS": True},
            {"default": POOLED, "direct": POSTGRES},
            ["django_watchdog.W007"],
        ),
    ],
)
def test_a_transaction_pooler_is_checked_for_what_cannot_work(watchdog, databases, expected):
    assert pooler_ids(watchdog, databases) == expected


READ_COMMITTED = "read committed"


class StubConnection:
    """What the database check reads of a connection: its vendor, and for the MySQL
    backend what the server says it is."""

    def __init__(self, vendor, display_name="", mariadb=None, version=(), isolation=None):
        self.vendor = vendor
        self.display_name = display_name
        self._mariadb, self._version = mariadb, version
        options = {"isolation_level": isolation} if isolation else {}
        self.settings_dict = {"OPTIONS": options}

    @property
    def mysql_is_mariadb(self):
        if self._mariadb is None:
            from django.db import OperationalError

            raise OperationalError("server unreachable")
        return self._mariadb

    @property
    def mysql_version(self):
        return self._version


def database_errors(monkeypatch, connection, *, connect):
    stubs = {"default": connection}
    monkeypatch.setattr(supported_databases, "connections", stubs)
    monkeypatch.setattr(checks, "connections", stubs)
    settings = {"ENGINE": "django.db.backends.dummy", "NAME": "x"}
    with override_settings(DATABASES={"default": settings}):
        return checks.check_database(databases=["default"] if connect else None)


@only_reads_databases
@pytest.mark.parametrize(
    ("connection", "connect", "says"),
    [
        (
            StubConnection("mysql", mariadb=True, version=(10, 5, 20), isolation=READ_COMMITTED),
            True,
            "is MariaDB 10.5.20; watchdog needs",
        ),
        (
            StubConnection("mysql", mariadb=False, version=(8, 4, 3), isolation=READ_COMMITTED),
            True,
            "is MySQL 8.4.3, which watchdog does not support",
        ),
        (
            StubConnection("mysql"),
            False,
            "has OPTIONS['isolation_level'] not set (REPEATABLE READ)",
        ),
        (
            StubConnection("mysql", mariadb=True, version=(10, 11, 6), isolation="repeatable read"),
            True,
            "has OPTIONS['isolation_level'] 'repeatable read'; watchdog needs 'read committed'",
        ),
        (
            StubConnection("oracle", display_name="Oracle"),
            False,
            "is Oracle, which watchdog does not support",
        ),
    ],
)
def test_an_unsupported_database_is_an_error_saying_what_is_supported(
    monkeypatch, connection, connect, says
):
    errors = database_errors(monkeypatch, connection, connect=connect)
    assert [error.id for error in errors] == ["django_watchdog.E016"]
    message = errors[0].msg
    assert message.startswith("DATABASES['default'] ") and says in message
    assert message.endswith(f"Supported: {supported_databases.supported()}.")
    assert "PostgreSQL 1" in message and "SQLite 3.35.0+" in message


@only_reads_databases
@pytest.mark.parametrize("vendor", ["postgresql", "sqlite"])
def test_postgresql_and_sqlite_pass_the_database_check(monkeypatch, vendor):
    assert database_errors(monkeypatch, StubConnection(vendor), connect=True) == []


@only_reads_databases
@pytest.mark.parametrize(
    ("connection", "connect"),
    [
        (
            StubConnection("mysql", mariadb=True, version=(10, 11, 6), isolation=READ_COMMITTED),
            True,
        ),
        (StubConnection("mysql", isolation=READ_COMMITTED), False),
        # The server does not answer: the worker's own start reports that.
        (StubConnection("mysql", isolation=READ_COMMITTED), True),
    ],
)
def test_mariadb_at_read_committed_passes_the_database_check(monkeypatch, connection, connect):
    assert database_errors(monkeypatch, connection, connect=connect) == []


def test_the_postgresql_floor_is_djangos_when_it_is_higher():
    from django.db.backends.postgresql.features import DatabaseFeatures

    floor = supported_databases.postgres_minimum()
    assert floor >= supported_databases.POSTGRES_MINIMUM
    assert floor >= tuple(DatabaseFeatures.minimum_database_version)


@only_reads_databases
def test_a_database_watchdogs_tables_are_routed_away_from_is_not_checked(monkeypatch):
    class ElsewhereRouter:
        def allow_migrate(self, db, app_label, **hints):
            return False if app_label == "django_watchdog" else None

    from django.db import router

    monkeypatch.setattr(router, "routers", [ElsewhereRouter()])
    assert database_errors(monkeypatch, StubConnection("oracle"), connect=False) == []
