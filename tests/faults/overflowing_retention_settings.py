"""Test settings with a retention period no date can be computed from (1e12 s, ~31,700
years): every prune raises ``OverflowError``. For worker subprocesses (test_housekeeping.py)."""

from tests.settings import *  # noqa: F403
from tests.settings import WATCHDOG as BASE

WATCHDOG = {**BASE, "RETENTION": 1e12}
