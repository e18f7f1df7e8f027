"""A batch: jobs one job thread claimed together and runs one after another.

With ``--batch N`` a job thread claims up to N ready jobs (each of a different queue) in one
statement, runs them in priority order, and writes all their results together with its
next claim, in one transaction. Every claimed job is ``running`` in the database from the
claim on, so the queue stays serial; the price is that a job waits for those before it in
its batch, and its result is written when the batch ends.

Ownership, under ``lock``: ``pending`` jobs are claimed but not started; ``decided`` jobs
ran and wait to be written. The job thread moves jobs from ``pending`` to running to
``decided``; whoever flushes (that thread at the batch's end, or the main thread when a
job of the batch is abandoned or the shutdown grace runs out) takes both lists at once,
so no job is ever written twice or started after it was released.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from ..domain.values import Decision
from .running import RunningJob


@dataclass(frozen=True, slots=True)
class Decided:
    """A job that ran, what it decided, and how long it took."""

    running: RunningJob
    decision: Decision
    duration: float


class Batch:
    """The jobs of one claim, as one job thread works through them."""

    def __init__(self, jobs: Iterable[RunningJob]) -> None:
        self.lock = threading.Lock()
        self.pending: deque[RunningJob] = deque(jobs)
        self.decided: list[Decided] = []
        #: The job its thread runs now (or ran last).
        self.current: RunningJob | None = None
        #: A job of this batch was abandoned: its thread is stuck in a handler.
        self.stuck = False

    def start_next(self, *, stopping: bool) -> RunningJob | None:
        """The next job to run, now counted as started; ``None`` when none may start."""
        with self.lock:
            if stopping or self.stuck or not self.pending:
                return None
            self.current = self.pending.popleft()
            return self.current

    def decide(self, decided: Decided) -> None:
        with self.lock:
            self.decided.append(decided)

    def take(self) -> tuple[list[Decided], list[RunningJob]]:
        """Everything left to write: (decided jobs, never-started jobs); empties the batch."""
        with self.lock:
            decided, unstarted = self.decided, list(self.pending)
            self.decided, self.pending = [], deque()
            return decided, unstarted

    def __len__(self) -> int:
        with self.lock:
            return len(self.pending) + len(self.decided)
