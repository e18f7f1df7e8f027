import pytest

from django_watchdog import handlers


@pytest.fixture
def clean_handlers():
    """Restore the handler registry after a test that registers its own."""
    saved = handlers.registered()
    yield
    handlers._registry.clear()
    handlers._registry.update(saved)
