import pytest

from django_watchdog import handlers

# The plugin users enable to get the ``watchdog_jobs`` fixture (tests/glue/test_testing_*.py).
pytest_plugins = ["django_watchdog.testing.pytest"]


@pytest.fixture
def clean_handlers():
    """Restore the handler registry after a test that registers its own."""
    saved = handlers.registered()
    yield
    handlers._registry.clear()
    handlers._registry.update(saved)


def pytest_collection_modifyitems(config, items):
    """Skip ``postgres_only`` tests unless the test database is PostgreSQL."""
    from django.db import connection

    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL (WATCHDOG_TEST_DB=postgres)")
    for item in items:
        if item.get_closest_marker("postgres_only") is not None:
            item.add_marker(skip)
