"""Test settings with a short worker timeout, for the outage tests' worker subprocesses."""

from tests.settings import *  # noqa: F403
from tests.settings import WATCHDOG as BASE

WATCHDOG = {**BASE, "WORKER_TIMEOUT": 2.0, "HEARTBEAT_INTERVAL": 0.5}

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    # A lock held past the busy timeout fails writes ("database is locked"), as a lock held
    # longer than a production busy timeout does; the outage tests hold it past both.
    DATABASES["default"]["OPTIONS"] = {**DATABASES["default"]["OPTIONS"], "timeout": 1}  # noqa: F405
