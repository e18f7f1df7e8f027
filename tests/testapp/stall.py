"""A ``queue_changed`` receiver that stalls a worker inside a transaction (fault tests).

Connected only in a worker started with ``WATCHDOG_TEST_STALL_QUEUE`` and
``WATCHDOG_TEST_STALL_DIR``: the first change to that queue (its lock held, the change not
committed) writes ``stalled`` in the directory, then waits until ``release`` appears there.
Later changes pass. A test stops the process once ``stalled`` exists: a worker frozen
between taking a queue's lock and committing, arranged rather than hoped for.
"""

import os
import time
from pathlib import Path

from django_watchdog.models import Job
from django_watchdog.signals import queue_changed


def _stall(sender, queue, **kwargs):
    if queue != os.environ["WATCHDOG_TEST_STALL_QUEUE"]:
        return
    directory = Path(os.environ["WATCHDOG_TEST_STALL_DIR"])
    marker = directory / "stalled"
    if marker.exists():
        return
    marker.write_text(str(os.getpid()))
    while not (directory / "release").exists():
        time.sleep(0.01)


def connect():
    queue_changed.connect(_stall, sender=Job, dispatch_uid="watchdog-test-stall")
