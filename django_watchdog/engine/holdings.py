"""What one worker holds in the database, shared by its threads: one owner, one lock.

The main thread claims and enforces timeouts, job threads run, settle and claim on, the
heartbeat thread flags cancellations, and all of them read or change the same three
things. Only this object changes them, each change under its lock, so a reader never sees
half of one: a job handed from one claim to the next, a batch replaced by the next one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from .batches import Batch
from .running import RunningJob


class Holdings:
    """Running jobs, batches and claims in flight of one worker.

    Invariants, under ``_lock``:

    - ``running`` maps a job id to the run that holds its claim, from the moment it is
      handed to a job thread (or claimed into a batch) until its settle or release was
      written or given up, or it was abandoned; a job id is never in it twice.
    - ``batches`` holds each batch a job thread works through, until that thread has
      written it (and put the next one, claimed with the write, in its place).
    - ``lost`` holds the token prefixes of claims that may have committed unseen (the
      connection failed around the commit); none of their jobs started, and each prefix
      stays until the store released its jobs.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, RunningJob] = {}
        self._batches: list[Batch] = []
        self._lost: set[str] = set()

    # -- running jobs ------------------------------------------------------------------

    def track(self, running: RunningJob) -> None:
        """``running`` now holds its claim in a job thread."""
        with self._lock:
            self._running[running.job_id] = running

    def hand_over(self, done: RunningJob, following: RunningJob | None) -> None:
        """``done`` settled (if still tracked); ``following``, claimed with it, runs next."""
        with self._lock:
            if self._running.get(done.job_id) is done:
                del self._running[done.job_id]
            if following is not None:
                self._running[following.job_id] = following

    def untrack(self, runs: Iterable[RunningJob]) -> None:
        """These runs were written or released (each only if it still holds its entry)."""
        with self._lock:
            for running in runs:
                if self._running.get(running.job_id) is running:
                    del self._running[running.job_id]

    def abandon(self, running: RunningJob) -> list[Batch]:
        """Forget ``running`` (given up on, settled): the batches its thread is stuck in."""
        with self._lock:
            self._running.pop(running.job_id, None)
            return [b for b in self._batches if b.current is running]

    def running_count(self) -> int:
        with self._lock:
            return len(self._running)

    def running_jobs(self) -> list[RunningJob]:
        with self._lock:
            return list(self._running.values())

    def running_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._running)

    # -- batches -----------------------------------------------------------------------

    def add_batch(self, batch: Batch) -> None:
        """A job thread takes ``batch``: its jobs hold their claims from now on."""
        with self._lock:
            for running in batch.pending:
                self._running[running.job_id] = running
            self._batches.append(batch)

    def batch_written(self, written: Iterable[RunningJob], following: Batch | None) -> None:
        """A batch's ``written`` jobs settled or were released; ``following`` was claimed."""
        with self._lock:
            for running in written:
                if self._running.get(running.job_id) is running:
                    del self._running[running.job_id]
            if following is not None:
                for running in following.pending:
                    self._running[running.job_id] = running

    def replace_batch(self, done: Batch, following: Batch | None) -> None:
        """The thread of ``done`` finished it and goes on with ``following``, if any."""
        with self._lock:
            self._batches.remove(done)
            if following is not None:
                self._batches.append(following)

    def batches(self) -> list[Batch]:
        with self._lock:
            return list(self._batches)

    def busy_batches(self) -> int:
        """Batches whose thread can take more work (not stuck in an abandoned handler)."""
        with self._lock:
            return sum(1 for batch in self._batches if not batch.stuck)

    # -- claims in flight --------------------------------------------------------------

    def lose_claim(self, token: str) -> None:
        """A claim under ``token`` failed, and may have committed unseen."""
        with self._lock:
            self._lost.add(token)

    def lost_claims(self) -> list[str]:
        with self._lock:
            return sorted(self._lost)

    def claims_released(self, tokens: Iterable[str], again: Iterable[str]) -> None:
        """The jobs of ``tokens`` were released, except those of ``again`` (try later)."""
        with self._lock:
            self._lost.difference_update(tokens)
            self._lost.update(again)
