"""Test settings with a retention period no cut-off can be computed from (1e12 s, ~31,700
years): every retention step fails (``ImproperlyConfigured`` naming the setting; before it
was validated, ``OverflowError``). For worker subprocesses (test_housekeeping.py)."""

from tests.settings import *  # noqa: F403
from tests.settings import WATCHDOG as BASE

WATCHDOG = {**BASE, "RETENTION": 1e12}
