"""Test settings with a retention period no cut-off can reach (test_poison_inputs.py)."""

from tests.settings import *  # noqa: F403
from tests.settings import WATCHDOG as BASE

WATCHDOG = {**BASE, "RETENTION": 1e12}
