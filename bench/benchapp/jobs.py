"""Watchdog handlers: ``bench`` stamps and returns; ``bench-sleep`` holds its queue busy."""

import time

from django_watchdog import handler

from ..stamp import stamp


@handler("bench")
def noop(job):
    stamp(job.payload)


@handler("bench-sleep")
def hold(job):
    """Keep the queue busy for ``payload`` seconds at most, or until cancelled."""
    deadline = time.monotonic() + float(job.payload)
    while time.monotonic() < deadline and not job.cancel_requested:
        time.sleep(0.2)
