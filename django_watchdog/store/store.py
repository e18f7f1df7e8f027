"""``Store(using)``: the store's verbs, bound to one database; every caller uses one.

The public API, the admin, the management commands, the worker engine and the tests all
change jobs through a ``Store``. Inputs are already validated (``django_watchdog.api`` does
that for users). Each verb is one short transaction or less, and says in its docstring what
holds before and after.

Lock waits: a store made with ``bounded=True`` (the worker's) never waits longer than
``WATCHDOG['LOCK_TIMEOUT']`` for a lock another transaction holds (``store.waits``): a verb
that would raises ``LockBusy`` (nothing changed) or, where it can go on without that lock,
skips what it could not lock (``reconcile_all``: ``deferred`` results; ``promote_due``:
other queues; ``reap``: nothing this time). Other stores wait as long as the database lets
them. Reads take no row locks on PostgreSQL, so they never wait on one.

Deadlocks: a verb's transaction that MariaDB rolled back whole as a deadlock's victim runs
again when the store began it, and raises ``DeadlockRolledBack`` inside a caller's
transaction (``store.deadlocks``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta
from typing import Any, Concatenate

from django.db import Error, connections, router, transaction

from ..domain.errors import WatchdogError
from ..domain.values import (
    CancelResult,
    ClaimResult,
    Decision,
    EnqueueResult,
    LaneFailure,
    QueueHead,
    ReconcileResult,
    SettledRecord,
    SettleResult,
)
from ..models import Job, ScheduleState
from . import (
    batches,
    cancel,
    claims,
    deadlocks,
    due,
    fail_lane,
    feed,
    heads,
    idle_queues,
    purge,
    queue_counts,
    recovery,
    reruns,
    retention,
    schedules,
    statistics,
    twins,
    waits,
    workers,
)
from .claims import Partition
from .dialects import dialect
from .enqueue import NewJob
from .enqueue import enqueue as enqueue_job
from .enqueue import enqueue_many as enqueue_jobs
from .retention import PRUNE_BATCH
from .statistics import Analyzed
from .waits import LockBusy

__all__ = ["PRUNE_BATCH", "LockBusy", "NewJob", "Partition", "Store"]


class Store:
    """The verbs of SPEC §4 on the database ``using`` (default: where ``Job`` is written)."""

    def __init__(self, using: str | None = None, *, bounded: bool = False) -> None:
        self.using: str = using or router.db_for_write(Job)
        self.bounded = bounded

    def _waits(self) -> AbstractContextManager[Any]:
        return waits.bounded() if self.bounded else nullcontext()

    def _in_own_transaction[**P, T](
        self, verb: Callable[Concatenate[str, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``verb(using, ...)`` in a transaction of its own whose lock waits are bounded
        (in a bounded store), run again if it was a deadlock's victim (``deadlocks``)."""

        def whole() -> T:
            with transaction.atomic(using=self.using):
                dialect(self.using).bound_lock_waits()
                return verb(self.using, *args, **kwargs)

        with self._waits():
            return deadlocks.run_retried(self.using, whole, verb.__name__)

    # jobs in

    def enqueue(self, new: NewJob) -> EnqueueResult:
        """Insert ``new`` once per ``job_id`` (a repeat is ``duplicate`` or ``JobConflict``)."""
        with self._waits():
            return enqueue_job(self.using, new)

    def enqueue_many(self, batch: Sequence[NewJob]) -> list[EnqueueResult]:
        """``enqueue`` each of ``batch`` in one transaction, all or nothing."""
        with self._waits():
            return enqueue_jobs(self.using, batch)

    def cancel(
        self,
        job_id: str,
        cancellation_id: str,
        *,
        only_if_queued: bool,
        requested_by: str | None = None,
    ) -> CancelResult:
        """Record an intent to cancel ``job_id`` (SPEC §4.7)."""
        with self._waits():
            return cancel.cancel(
                self.using,
                job_id,
                cancellation_id,
                only_if_queued=only_if_queued,
                requested_by=requested_by,
            )

    def rerun(
        self, job_id: str, *, rerun_id: str | None = None, requested_by: str | None = None
    ) -> EnqueueResult:
        """Enqueue a settled job again, as a new job linked to it."""
        with self._waits():
            return reruns.rerun(self.using, job_id, rerun_id=rerun_id, requested_by=requested_by)

    def next_rerun_id(self, job_id: str) -> str:
        """The id ``rerun`` gives ``job_id``'s next re-run when not told one."""
        return reruns.next_rerun_id(self.using, job_id)

    def queued_twin(self, new: NewJob) -> Job | None:
        """The oldest queued job ``new`` would repeat, its queue locked until the caller's
        transaction (which must be open, and then enqueues ``new`` if there is none) ends."""
        with self._waits():
            return twins.queued_twin(self.using, new)

    def fire_schedule(
        self,
        name: str,
        *,
        now: datetime,
        due: Callable[[datetime], Sequence[datetime]],
        new_job: Callable[[datetime], NewJob],
    ) -> tuple[list[tuple[str, str]], datetime]:
        """Enqueue the ticks of schedule ``name`` that ``due(handled_until)`` names, and
        record ``now`` as handled, under the schedule's lock: (job id, status) per tick and
        the new ``handled_until``."""
        with self._waits():
            return schedules.fire(self.using, name, now=now, due=due, new_job=new_job)

    # running jobs

    def claim(
        self,
        partition: Partition | None = None,
        *,
        worker_id: str | None = None,
        token: str | None = None,
    ) -> ClaimResult:
        """Take the best ready job of ``partition`` (every lane if ``None``): ``claimed``, or
        ``cancelled`` (settled unrun), or ``none``. ``token``: the claim's token prefix."""
        with self._waits():
            return claims.claim(
                self.using, partition or Partition(), worker_id=worker_id, token=token
            )

    def settle(
        self,
        job_id: str,
        claim_token: str,
        decision: Decision,
        *,
        claim_next: Partition | None = None,
        worker_id: str | None = None,
        token: str | None = None,
    ) -> tuple[SettleResult, ClaimResult | WatchdogError | None]:
        """Settle for the holder of ``claim_token`` (fencing), and with ``claim_next`` claim
        the next job in the same transaction (under the token prefix ``token``)."""
        with self._waits():
            return claims.settle(
                self.using,
                job_id,
                claim_token,
                decision,
                claim_next=claim_next,
                worker_id=worker_id,
                token=token,
            )

    def settle_and_claim(
        self,
        settlements: Sequence[batches.Settlement],
        *,
        release: Sequence[tuple[str, str]] = (),
        claim_next: Partition | None = None,
        limit: int = 0,
        worker_id: str | None = None,
        token: str | None = None,
    ) -> tuple[list[SettleResult], list[ClaimResult | WatchdogError]]:
        """Settle a batch, release never-started jobs and claim up to ``limit`` (under the
        token prefix ``token``), in one transaction."""
        with self._waits():
            return batches.settle_and_claim(
                self.using,
                settlements,
                release=release,
                claim_next=claim_next,
                limit=limit,
                worker_id=worker_id,
                token=token,
            )

    def reconcile(self, job_id: str, claim_token: str) -> ReconcileResult:
        """Resolve a running job whose execution disappeared, exactly once (SPEC §4.8)."""
        with self._waits():
            return recovery.reconcile(self.using, job_id, claim_token)

    def recover(
        self,
        *,
        timeout: float,
        dead_workers: Sequence[str] = (),
        alive_workers: Sequence[str] = (),
    ) -> list[ReconcileResult]:
        """Reconcile the running jobs of workers silent for ``timeout`` seconds on the
        database's clock (or without a row), and of ``dead_workers``, never of
        ``alive_workers``."""
        found = self.disappeared_claims(
            timeout=timeout, dead_workers=dead_workers, alive_workers=alive_workers
        )
        return self.reconcile_all(found)

    def disappeared_claims(
        self,
        *,
        timeout: float,
        dead_workers: Sequence[str] = (),
        alive_workers: Sequence[str] = (),
    ) -> list[tuple[str, str]]:
        """Claims of workers silent for ``timeout`` (database clock), gone, or dead."""
        return recovery.disappeared_claims(
            self.using, timeout=timeout, dead_workers=dead_workers, alive_workers=alive_workers
        )

    def claims_of(self, workers: Sequence[str]) -> list[tuple[str, str]]:
        return recovery.claims_of(self.using, workers)

    def reconcile_all(self, found: Sequence[tuple[str, str]]) -> list[ReconcileResult]:
        """Reconcile each claim; one whose queue another transaction holds is ``deferred``."""
        with self._waits():
            return recovery.reconcile_all(self.using, found)

    def release_lost_claims(
        self, worker_id: str, tokens: Sequence[str]
    ) -> tuple[list[str], list[tuple[str, str]]]:
        """Release the jobs that claims under these token prefixes took for ``worker_id``
        (committed while its connection failed, so never started): the ids released, and
        (job id, token prefix) of those whose queue another transaction held (try again)."""
        released: list[str] = []
        deferred: list[tuple[str, str]] = []
        for job_id, token in recovery.lost_claims(self.using, worker_id, tokens):
            try:
                with self._waits():
                    if recovery.release(self.using, job_id, token):
                        released.append(job_id)
            except LockBusy:
                deferred.append((job_id, token.rpartition(".")[0]))
        return released, deferred

    # time

    def promote_due(self, *, now: datetime) -> int:
        """Give delayed jobs that are due their place in their queues' order; how many."""
        try:
            with self._waits():
                return due.promote_due(self.using, now=now)
        except LockBusy:
            return 0  # the jobs enter on a later pass

    def next_due(self) -> datetime | None:
        return due.next_due(self.using)

    def ready_probe(self, partition: Partition) -> tuple[object, ...] | None:
        """A cheap read whose values change when new work may be ready: the partition's
        best ready job and, on MariaDB, the next due time (``claims.ready_probe``)."""
        return claims.ready_probe(self.using, partition)

    def retries_pending(self, partition: Partition) -> bool:
        """Whether a job of the partition waits to be retried (``--burst`` waits for it)."""
        return due.retries_pending(self.using, partition.lanes, partition.exclude_lanes)

    # lanes and queues

    def fail_lane(self, lane: str, reason: str) -> LaneFailure:
        """Settle up to 256 pending jobs of ``lane`` ``failed`` (SPEC §4.9)."""
        with self._waits():
            return fail_lane.fail_lane(self.using, lane, reason)

    def purge_queued(self, queue: str) -> int:
        """Delete ``queue``'s queued jobs (SPEC §4.10); how many."""
        with self._waits():
            return purge.purge_queued(self.using, queue)

    def prune_batches(
        self, *, older_than: timedelta, now: datetime, batch_size: int = retention.PRUNE_BATCH
    ) -> Iterator[int]:
        """Delete jobs settled before ``now - older_than``, ``batch_size`` per transaction;
        yield each batch's count."""
        with self._waits():
            yield from retention.prune_batches(
                self.using, older_than=older_than, now=now, batch_size=batch_size
            )

    def prune(
        self,
        *,
        older_than: timedelta,
        now: datetime,
        batch_size: int = PRUNE_BATCH,
        max_batches: int | None = None,
    ) -> int:
        """``prune_batches`` to the end, or for ``max_batches`` batches; how many deleted."""
        with self._waits():
            return retention.prune(
                self.using,
                older_than=older_than,
                now=now,
                batch_size=batch_size,
                max_batches=max_batches,
            )

    def forget_idle_task_queues(self) -> int:
        """Delete up to ``idle_queues.IDLE_BATCH`` rows of task queues no job names; how many."""
        with self._waits():
            return idle_queues.forget_idle_task_queues(self.using)

    def analyze_unanalyzed(self, *, skip: Collection[str] = ()) -> Analyzed:
        """Analyze watchdog's tables the database has no statistics of, once they hold ten
        pages, but those in ``skip`` (``statistics``)."""
        with self._waits():
            return statistics.analyze_unanalyzed(self.using, skip=skip)

    # reads

    def queue_head(self, queue: str) -> QueueHead:
        return heads.read(self.using, queue)

    def queue_heads(self, queues: Sequence[str]) -> dict[str, QueueHead]:
        """The head of each of ``queues``, in one statement."""
        return heads.read_many(self.using, queues)

    def capped_counts(self, queues: Sequence[str], cap: int) -> list[queue_counts.Count]:
        """Per queue of ``queues`` and state with jobs: (queue, state, jobs counted up to
        ``cap`` per part of the state, the earliest ``enqueued_at`` of the queued ones
        read); reads at most ``cap`` jobs per queue and part (``store/queue_counts.py``)."""
        return queue_counts.capped_counts(self.using, queues, cap)

    def latest_settled(self, queue: str) -> Job | None:
        """The settled job of ``queue`` latest in its order (highest ``position``), as the
        seed's highest sequence: not the one that settled last, when a later job overtook."""
        settled = Job.objects.using(self.using).filter(queue=queue, state="settled")
        # Positions are unique but on MariaDB, where a due delayed job's may equal the id
        # of a job enqueued after it (dialects/mariadb_terms.py): the later one is latest.
        return settled.order_by("-position", "-id").first()

    def settled_jobs(
        self,
        after: int,
        limit: int,
        *,
        lanes: Sequence[str] = (),
        exclude_lanes: Sequence[str] = (),
    ) -> list[SettledRecord]:
        """The settled feed (SPEC §4.11) after the position ``after``."""
        return feed.settled_jobs(self.using, after, limit, lanes=lanes, exclude_lanes=exclude_lanes)

    def schedule_states(self) -> dict[str, ScheduleState]:
        """Every periodic schedule's state row, by name."""
        return schedules.states(self.using)

    # workers

    def workers_on_host(self, host: str) -> list[workers.Registered]:
        return workers.on_host(self.using, host)

    def register(
        self,
        worker_id: str,
        *,
        started_at: datetime,
        lanes: Sequence[str],
        exclude_lanes: Sequence[str],
        concurrency: int,
    ) -> None:
        self._in_own_transaction(
            workers.register,
            worker_id,
            started_at=started_at,
            lanes=lanes,
            exclude_lanes=exclude_lanes,
            concurrency=concurrency,
        )

    def heartbeat(self, worker_id: str) -> bool:
        """Stamp the worker alive: one statement, its own transaction (an idle worker's
        cost); ``False`` if its row was reaped."""
        with self._waits():
            return workers.heartbeat(self.using, worker_id)

    def deregister(self, worker_id: str) -> None:
        self._in_own_transaction(workers.deregister, worker_id)

    def reap(self, *, timeout: float) -> int:
        """Delete long-silent workers' rows; 0 (try again later) if a row was locked."""
        try:
            return self._in_own_transaction(workers.reap, timeout=timeout)
        except LockBusy:
            return 0

    def cancellations(self, job_ids: Iterable[str]) -> set[str]:
        return workers.cancellations(self.using, job_ids)

    def lanes_without_handler(self, handled: Sequence[str]) -> list[str]:
        return workers.lanes_without_handler(self.using, handled)

    def release_connection(self) -> None:
        """Close this thread's connection, e.g. after the server went away."""
        try:
            connections[self.using].close()
        except Error:  # noqa: S110 - a broken connection may fail to close; it is gone
            pass
