"""``manage.py watchdog prune`` on the benchmark's settled history, timed batch by batch.

The age is chosen so the prune deletes the ``oldest`` rows of the history bench/backlog.py
generated (row n settled one second after row n - 1): half a second younger than row
``oldest``. The command runs in-process (``call_command``, default batch size, ``--yes``);
each line it prints is timed as it comes, so the result has every batch's end as well as
the command's start and end (``time.time()``, to compare with the stamps of jobs run
meanwhile). Runs inside the watchdog Django settings (bench.driver).
"""

from __future__ import annotations

import re
import time
from datetime import timedelta
from typing import Any

from django.core.management import call_command
from django.utils import timezone

from django_watchdog.models import Job
from django_watchdog.store.store import PRUNE_BATCH

from .backlog import history_id

BATCH_LINE = re.compile(r"^deleted (\d+) jobs")
TOTAL_LINE = re.compile(r"^(\d+) settled jobs pruned")


class TimedLines:
    """A stdout for ``call_command`` that notes when each line was written."""

    def __init__(self) -> None:
        self.lines: list[tuple[float, str]] = []

    def write(self, text: str) -> None:
        at = time.time()
        self.lines += [(at, line) for line in text.splitlines() if line]

    def flush(self) -> None:
        pass


def prune(args: dict[str, Any]) -> dict[str, Any]:
    """Prune the ``oldest`` rows of the history; when each batch ended, and the total."""
    oldest = Job.objects.get(job_id=history_id(int(args["oldest"])))
    assert oldest.settled_at is not None
    cutoff = oldest.settled_at + timedelta(seconds=0.5)
    age = (timezone.now() - cutoff).total_seconds()
    out = TimedLines()
    started = time.time()
    call_command("watchdog", "prune", "--older-than", f"{age:.3f}s", "--yes", stdout=out)
    ended = time.time()
    batches = [(at, int(m.group(1))) for at, line in out.lines if (m := BATCH_LINE.match(line))]
    totals = [(at, int(m.group(1))) for at, line in out.lines if (m := TOTAL_LINE.match(line))]
    total_at, total = totals[0] if totals else (ended, 0)
    return {
        "started": started,
        "ended": ended,
        "batches": batches,
        # When the total is printed: the end of the batch that found nothing more, if the
        # last one printed was full.
        "total_at": total_at,
        "deleted": total,
        "batch_size": PRUNE_BATCH,
    }
