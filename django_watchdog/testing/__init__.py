"""Test your jobs: run what a test enqueued inline, or list it without running it.

``run_jobs()`` runs the ready jobs in the calling thread, inside the caller's transaction
(a ``django.test.TestCase``'s), with the real handlers, queue order, decisions, retry
policies and signals; ``enqueued_jobs()`` and ``capture_enqueued()`` show what is waiting.
For pytest, enable the ``watchdog_jobs`` fixture with
``pytest_plugins = ["django_watchdog.testing.pytest"]``.
"""

from .enqueued import capture_enqueued, enqueued_jobs
from .runner import TooManyRuns, arun_jobs, run_jobs
from .runs import JobRun

__all__ = [
    "JobRun",
    "TooManyRuns",
    "arun_jobs",
    "capture_enqueued",
    "enqueued_jobs",
    "run_jobs",
]
