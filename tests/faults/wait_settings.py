"""Test settings for workers in the stalled-worker and partition fault tests: short lock
waits, and a server that ends a stalled worker's idle transaction after 2 s."""

from tests.settings import *  # noqa: F403

WATCHDOG = {**WATCHDOG, "LOCK_TIMEOUT": 0.2, "IDLE_IN_TRANSACTION_TIMEOUT": 2.0}  # noqa: F405

if ENGINE == "sqlite":  # noqa: F405
    # A worker behind a held write lock fails each statement after 1 s instead of 20.
    DATABASES["default"]["OPTIONS"] = {**DATABASES["default"]["OPTIONS"], "timeout": 1}  # noqa: F405
