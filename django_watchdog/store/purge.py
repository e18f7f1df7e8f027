"""Purge a queue's queued jobs (SPEC §4.10): delete them; running and settled jobs stay."""

from __future__ import annotations

from django.db import transaction

from ..domain.states import State
from ..models import Job
from . import deadlocks, heads
from .dialects import dialect


@deadlocks.retried
def purge_queued(using: str, queue: str) -> int:
    """Delete ``queue``'s queued jobs (never running or settled ones); return how many."""
    with transaction.atomic(using=using):
        dialect(using).lock_queue(queue)
        deleted, _ = Job.objects.using(using).filter(queue=queue, state=State.QUEUED).delete()
        if deleted:
            heads.announce(queue, None, using=using)
    return deleted
