"""A pytest plugin: the ``watchdog_jobs`` fixture (needs pytest-django).

Enable it in your root ``conftest.py`` with
``pytest_plugins = ["django_watchdog.testing.pytest"]`` (or ``-p django_watchdog.testing.pytest``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import pytest

from .enqueued import capture_enqueued, enqueued_jobs
from .runner import run_jobs
from .runs import JobRun

if TYPE_CHECKING:
    from ..models import Job


class WatchdogJobs:
    """The ``watchdog_jobs`` fixture: ``run_jobs`` and friends, on one database."""

    def __init__(self, using: str | None = None) -> None:
        self.using = using

    def run(self, **options: Any) -> list[JobRun]:
        """Run the ready jobs inline: ``django_watchdog.testing.run_jobs``."""
        return run_jobs(using=self.using, **options)

    def enqueued(self, **filters: Any) -> list[Job]:
        """The jobs waiting to run: ``django_watchdog.testing.enqueued_jobs``."""
        return enqueued_jobs(using=self.using, **filters)

    def capture(self) -> AbstractContextManager[list[Job]]:
        """The jobs enqueued in a block: ``django_watchdog.testing.capture_enqueued``."""
        return capture_enqueued(using=self.using)


@pytest.fixture
def watchdog_jobs(db: None) -> Iterator[WatchdogJobs]:
    """Run and inspect the jobs this test enqueues (database access included)."""
    yield WatchdogJobs()
