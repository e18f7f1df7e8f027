"""Test settings with a heartbeat far longer than a worker's life in a test: a worker that
stops must not wait for (or leave behind) its heartbeat thread. For worker subprocesses
(test_connections_at_exit.py)."""

from tests.settings import *  # noqa: F403
from tests.settings import WATCHDOG as BASE

WATCHDOG = {**BASE, "HEARTBEAT_INTERVAL": 60.0, "WORKER_TIMEOUT": 180.0}
