"""An SQLite write lock held past WORKER_TIMEOUT costs no duplicate (SPEC §9.15).

Another connection holds ``BEGIN EXCLUSIVE`` on the database file while two workers run
jobs: every write (heartbeats included) waits on it, while reads go on (WAL).
"""

import sqlite3
import time

import pytest
from django.db import connection

from .outages import HOSTS, through_outage

pytestmark = [pytest.mark.faults, pytest.mark.acceptance, pytest.mark.django_db(transaction=True)]


def locked(hold: float) -> None:
    """Hold the test database's write lock for ``hold`` seconds."""
    holder = sqlite3.connect(connection.settings_dict["NAME"], timeout=30, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        try:
            time.sleep(hold)  # the lock's length is the fault under test
        finally:
            holder.execute("ROLLBACK")
    finally:
        holder.close()


@HOSTS
def test_a_lock_held_past_the_timeout_recovers_no_live_workers_job(spawn_worker, runs, hosts):
    if connection.vendor != "sqlite":
        pytest.skip("an SQLite file lock")
    through_outage(spawn_worker, runs, hosts, locked)
