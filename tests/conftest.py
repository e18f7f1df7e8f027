import os

import pytest

from django_watchdog import handlers

# The plugin users enable to get the ``watchdog_jobs`` fixture (tests/glue/test_testing_*.py).
pytest_plugins = ["django_watchdog.testing.pytest"]

#: WATCHDOG_TEST_DB=pgbouncer: PostgreSQL through PgBouncer in transaction mode.
THROUGH_PGBOUNCER = os.environ.get("WATCHDOG_TEST_DB") == "pgbouncer"


@pytest.fixture(autouse=True)
def no_queue_seen_before():
    """Each test starts with connections that have seen no queue exist: the hint
    (``postgres_enqueue.known_queues``) outlives the rows a test leaves, and a stale one
    changes which statements an enqueue sends (not what it does)."""
    from django.db import connections

    for connection in connections.all(initialized_only=True):
        connection.__dict__.pop("_watchdog_known_queues", None)


@pytest.fixture
def clean_handlers():
    """Restore the handler registry after a test that registers its own."""
    saved = handlers.registered()
    yield
    handlers._registry.clear()
    handlers._registry.update(saved)


#: Markers of tests that reach the database under test, with or without a fixture for it.
REACHES_THE_DATABASE = (
    "django_db",
    "every_database",
    "acceptance",
    "faults",
    "postgres_only",
    "mariadb_only",
    "server_only",
    "concurrent_writers",
    "pgbouncer_only",
)
#: Fixtures that set up the test database (each test database fixture depends on this one).
DATABASE_FIXTURE = "django_db_setup"


def uses_the_database(item: pytest.Item) -> bool:
    """Whether ``item`` may behave differently from one database to another: it asks for
    the database (a mark, a fixture, a Django ``TransactionTestCase``), runs real workers,
    or is marked ``every_database`` (it reaches the database from a subprocess). Every other
    test is refused the database by pytest-django, so its verdict cannot depend on it."""
    from django.test import TransactionTestCase

    if any(item.get_closest_marker(name) is not None for name in REACHES_THE_DATABASE):
        return True
    if DATABASE_FIXTURE in getattr(item, "fixturenames", ()):
        return True
    cls = getattr(item, "cls", None)
    return cls is not None and issubclass(cls, TransactionTestCase)


@pytest.fixture
def spans():
    """Tracing on for this test, with OpenTelemetry's SDK: ``tests.spans.Spans``."""
    from tests.spans import tracing_on

    with tracing_on() as found:
        yield found


def pytest_collection_modifyitems(config, items):
    """Mark the tests that do not use the database ``database_free`` (scripts/test runs
    them once, in the SQLite run, and ``-m "not database_free"`` on every other database);
    skip ``postgres_only``, ``mariadb_only``, ``server_only`` (PostgreSQL or MariaDB) and
    ``pgbouncer_only`` tests elsewhere, and ``concurrent_writers`` tests on SQLite (one
    writer at a time)."""
    from django.db import connection

    for item in items:
        if not uses_the_database(item):
            item.add_marker(pytest.mark.database_free)

    only = {
        "postgres_only": (("postgresql",), "needs PostgreSQL (WATCHDOG_TEST_DB=postgres)"),
        "mariadb_only": (("mysql",), "needs MariaDB (WATCHDOG_TEST_DB=mariadb)"),
        "server_only": (
            ("postgresql", "mysql"),
            "needs a database server (WATCHDOG_TEST_DB=postgres or mariadb)",
        ),
        "concurrent_writers": (
            ("postgresql", "mysql"),
            "needs concurrent writers (PostgreSQL or MariaDB)",
        ),
    }
    skip_pooled = pytest.mark.skip(reason="needs PgBouncer (WATCHDOG_TEST_DB=pgbouncer)")
    for item in items:
        for marker, (vendors, reason) in only.items():
            if item.get_closest_marker(marker) is not None and connection.vendor not in vendors:
                item.add_marker(pytest.mark.skip(reason=reason))
        if item.get_closest_marker("pgbouncer_only") is not None and not THROUGH_PGBOUNCER:
            item.add_marker(skip_pooled)


if THROUGH_PGBOUNCER:

    @pytest.fixture(scope="session")
    def django_db_modify_db_settings(django_db_modify_db_settings):
        """Before the test database is (re)created: end sessions PgBouncer kept open on it."""
        _end_sessions_on_test_database()

    @pytest.fixture(scope="session")
    def django_db_setup(django_db_setup):
        """After the run, before the test database is dropped: the same."""
        yield
        _end_sessions_on_test_database()


def _end_sessions_on_test_database():
    """Terminate the server sessions on the test database (PgBouncer keeps them pooled, so
    DROP DATABASE would find it "being accessed by other users")."""
    import psycopg
    from django.conf import settings

    direct = settings.DATABASES["direct"]
    with psycopg.connect(
        dbname="postgres", user=direct["USER"], host=direct["HOST"], port=direct["PORT"]
    ) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            (settings.DATABASES["default"]["TEST"]["NAME"],),
        )
