"""A worker behind a SQLite write lock someone else holds still stops on SIGTERM.

SQLite has one write lock for the whole database; its busy timeout (``OPTIONS['timeout']``,
1 s here) bounds each wait for it, then the statement fails like an outage and the worker
backs off (up to 5 s). SIGTERM must end that backoff at once: the worker then stops within
about two busy timeouts (the statement it is in, and its deregistration), well before the
backoff it was in would have ended. The signal is sent as the longest backoff begins, so
the verdict "sooner than the backoff" leaves seconds of slack for a loaded machine.
"""

import re
import signal
import sqlite3
import time

import pytest
from django.db import connection

from django_watchdog.engine.backoff import BACKOFF_MAX
from tests.acceptance.conftest import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]

SETTINGS = {"DJANGO_SETTINGS_MODULE": "tests.faults.wait_settings"}


def test_sigterm_stops_a_worker_stuck_behind_a_held_write_lock(spawn_worker):
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's database-wide write lock")
    worker = spawn_worker(env=SETTINGS)
    wait_until(lambda: "watchdog worker" in worker.output(), message="the worker to start")
    holder = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        # Each statement now fails after the busy timeout and the backoff doubles: signal
        # as the longest backoff begins (the old worker slept it out before looking).
        longest = re.escape(f"retry_in_s={BACKOFF_MAX:.3f}")
        wait_until(
            lambda: re.search(rf"store_unavailable .*{longest}", worker.output()),
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
    assert took < BACKOFF_MAX, f"stopped {took:.1f} s after SIGTERM, not during the backoff"
