"""A worker behind a SQLite write lock someone else holds still stops on SIGTERM.

SQLite has one write lock for the whole database; its busy timeout (``OPTIONS['timeout']``,
1 s here) bounds each wait for it, then the statement fails like an outage and the worker
backs off (up to 5 s). SIGTERM must end that backoff at once: the worker then stops within
about two busy timeouts (the statement it is in, and its deregistration), not a backoff
more.
"""

import re
import signal
import sqlite3
import time

import pytest
from django.db import connection

from tests.acceptance.conftest import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.faults.wait_settings"}
#: The busy timeout of ``wait_settings``, and what the stop may take beyond two of them
#: (a process exiting on a loaded machine).
BUSY_TIMEOUT = 1.0
SLACK = 1.0


def test_sigterm_stops_a_worker_stuck_behind_a_held_write_lock(spawn_worker):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's database-wide write lock")
    worker = spawn_worker(env=SETTINGS)
    wait_until(lambda: "watchdog worker" in worker.output(), message="the worker to start")
    holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        # Each statement now fails after the busy timeout and the backoff doubles: signal
        # as a 3.2 s backoff begins (the old worker slept it out before looking).
        wait_until(
            lambda: re.search(r"store_unavailable .*retry_in_s=3\.200", worker.output()),
            timeout=60,
            message="a long backoff",
        )
        signalled = time.monotonic()
        worker.signal(signal.SIGTERM)
        assert worker.wait(timeout=60) == 0, worker.output()
        took = time.monotonic() - signalled
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert took < 2 * BUSY_TIMEOUT + SLACK, f"stopped {took:.1f} s after SIGTERM"
