"""Each queue's jobs per state, counted up to a cap: what a page of queues shows.

Each count reads at most ``cap`` jobs per part of a state (queued: those waiting in the
queue's order, then the delayed ones; running; settled), by the index that serves the part,
so a queue of a million jobs costs what a queue of ``cap`` does. One statement whose text
does not grow with the number of queues (``Dialect.capped_counts_statement``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import rows
from .dialects import dialect

#: (queue, state, jobs counted, the earliest ``enqueued_at`` of the queued ones read).
Count = tuple[str, str, int, Any]


def capped_counts(using: str, queues: Sequence[str], cap: int) -> list[Count]:
    """Per queue of ``queues`` and state: its jobs counted up to ``cap`` per part."""
    if not queues:
        return []
    d = dialect(using)
    return [
        (queue, state, count, rows.decode(using, "enqueued_at", at) if at is not None else None)
        for queue, state, count, at in d.fetch(*d.capped_counts_statement(queues, cap))
    ]
