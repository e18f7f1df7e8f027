"""Test settings plus a schedule every second, for worker subprocesses (test_schedules.py)."""

from tests.settings import *  # noqa: F403
from tests.settings import WATCHDOG as BASE

WATCHDOG = {
    **BASE,
    "SCHEDULES": {
        "every-second": {"cron": "* * * * * *", "lane": "t-record", "missed": "all"},
    },
}
