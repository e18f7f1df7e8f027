"""Each queue's jobs per state, counted up to a cap: what a page of queues shows.

Each count reads at most ``cap`` jobs per part of a state, in the order of the index that
serves the part, so a queue of a million jobs costs what a queue of ``cap`` does. One
statement per need where the dialect has one (``Dialect.capped_counts_statement``); else
one ``UNION ALL`` per state of an arm per queue and part, composed with the ORM.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connections
from django.db.models import QuerySet

from ..domain.states import State
from ..models import Job
from .dialects import dialect

#: Per state, its parts: filters, and the order of the index that serves them (the order
#: steers the planner to it: with no order, a LIMIT over a queue with none of these jobs
#: may scan the table, the planner expecting to meet some soon). Queued jobs: the next to
#: run in queue order (the head index), then the delayed ones (the due index); past the
#: cap, the oldest queued is the oldest of the next ones to run. Settled jobs: the queue's
#: latest (the queue_latest index).
PARTS: dict[State, list[tuple[dict[str, bool], tuple[str, ...]]]] = {
    State.QUEUED: [
        ({"delayed": False}, ("-priority", "position")),
        ({"delayed": True}, ("run_after",)),
    ],
    State.RUNNING: [({}, ())],
    State.SETTLED: [({}, ("-position",))],
}

#: (queue, state, jobs counted, the earliest ``enqueued_at`` of the queued ones read).
Count = tuple[str, str, int, Any]


def capped_counts(using: str, queues: Sequence[str], cap: int) -> list[Count]:
    """Per queue of ``queues`` and state with jobs: its jobs counted up to ``cap`` per part."""
    d = dialect(using)
    statement = d.capped_counts_statement(queues, cap)
    if statement is not None:
        return [(queue, state, count, at) for queue, state, count, at in d.fetch(*statement)]
    jobs = Job.objects.using(using).order_by()
    counts: dict[tuple[str, str], int] = {}
    oldest: dict[str, Any] = {}
    for state, parts in PARTS.items():
        arms = [
            jobs.filter(queue=name, state=state, **more).order_by(*order)[:cap]
            for name in queues
            for more, order in parts
        ]
        for _id, queue, enqueued_at in _rows_of(arms, using):
            counts[(queue, state)] = counts.get((queue, state), 0) + 1
            if state == State.QUEUED and (queue not in oldest or enqueued_at < oldest[queue]):
                oldest[queue] = enqueued_at
    return [(queue, state, count, oldest.get(queue)) for (queue, state), count in counts.items()]


def _rows_of(arms: list[QuerySet[Job]], using: str) -> QuerySet[Job, tuple[Any, ...]]:
    """One UNION ALL statement of ``arms`` (each already sliced): ``(id, queue,
    enqueued_at)`` rows. Where the database takes no LIMIT in a compound statement's arms
    (SQLite), each arm is the jobs whose id its sliced subquery finds. With the id
    selected, the union can take the model's ordering."""
    columns = ("id", "queue", "enqueued_at")
    if connections[using].features.supports_slicing_ordering_in_compound:
        rows = [arm.values_list(*columns) for arm in arms]
    else:
        jobs = Job.objects.using(using).order_by()
        rows = [jobs.filter(pk__in=arm.values("pk")).values_list(*columns) for arm in arms]
    return rows[0].union(*rows[1:], all=True)
