"""Which new jobs of an enqueue are the heads of the queues it created (decided in Python:
nothing else is in such a queue)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..enqueue import NewJob


def best_new_jobs(batch: Sequence[NewJob], delays: Sequence[bool], queues: set[str]) -> set[int]:
    """Indexes in ``batch`` of each of ``queues``' best non-delayed job (older wins ties)."""
    best: dict[str, int] = {}
    for index, new in enumerate(batch):
        if delays[index] or new.queue not in queues:
            continue
        held = best.get(new.queue)
        if held is None or new.priority > batch[held].priority:
            best[new.queue] = index
    return set(best.values())
