"""What the engine needs from outside it, typed as protocols: the store's verbs (the
worker's, and its housekeeping's), a lane's options. The worker is built on these alone;
the management command hands in the real ones (``store.worker_store.WorkerStore``, the
handler registry's options) and the unit tests hand in fakes that declare these protocols.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from ..domain.errors import WatchdogError
from ..domain.retries import RetryPolicy
from ..domain.values import ClaimResult, Decision, ReconcileResult, SettleResult
from ..store.batches import Settlement
from ..store.claims import Partition
from ..store.statistics import Analyzed
from ..store.workers import Registered

if TYPE_CHECKING:
    from ..store.enqueue import NewJob


class EngineStore(Protocol):
    """The store verbs the worker calls, bound to one database.

    Each is one short transaction or less and waits for a lock at most
    ``WATCHDOG['LOCK_TIMEOUT']``: ``claim``, ``settle`` and ``settle_and_claim`` then raise
    ``LockBusy`` (nothing changed); the others skip what they could not lock.
    """

    def claim(
        self, partition: Partition, *, worker_id: str, token: str | None = None
    ) -> ClaimResult:
        """Claim the best ready job of ``partition`` for ``worker_id``."""
        ...

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
        """Settle with the claim token; with ``claim_next``, claim in the same transaction."""
        ...

    def settle_and_claim(
        self,
        settlements: Sequence[Settlement],
        *,
        release: Sequence[tuple[str, str]] = (),
        claim_next: Partition | None = None,
        limit: int = 0,
        worker_id: str | None = None,
        token: str | None = None,
    ) -> tuple[list[SettleResult], list[ClaimResult | WatchdogError]]:
        """Settle a batch, release never-started jobs, claim up to ``limit``: one transaction."""
        ...

    def promote_due(self, *, now: datetime) -> int:
        """Move delayed jobs due at ``now`` into their queues; how many."""
        ...

    def next_due(self) -> datetime | None:
        """When the next delayed job or retry is due, if any."""
        ...

    def ready_probe(self, partition: Partition) -> tuple[object, ...] | None:
        """A cheap read whose values change when new work may be ready: the partition's
        best ready job and, on MariaDB, the next due time (``claims.ready_probe``)."""
        ...

    def retries_pending(self, partition: Partition) -> bool:
        """Whether a job of ``partition`` waits to be retried."""
        ...

    def disappeared_claims(
        self,
        *,
        timeout: float,
        dead_workers: Sequence[str] = (),
        alive_workers: Sequence[str] = (),
    ) -> list[tuple[str, str]]:
        """(job id, claim token) of claims whose worker disappeared."""
        ...

    def claims_of(self, workers: Sequence[str]) -> list[tuple[str, str]]:
        """(job id, claim token) of the running jobs of ``workers``."""
        ...

    def reconcile_all(self, found: Sequence[tuple[str, str]]) -> list[ReconcileResult]:
        """Reconcile each disappeared claim (SPEC §4.8)."""
        ...

    def release_lost_claims(
        self, worker_id: str, tokens: Sequence[str]
    ) -> tuple[list[str], list[tuple[str, str]]]:
        """Put back jobs claimed under these token prefixes: (released, deferred)."""
        ...

    def workers_on_host(self, host: str) -> list[Registered]:
        """The worker rows registered from ``host``."""
        ...

    def register(
        self,
        worker_id: str,
        *,
        started_at: datetime,
        lanes: Sequence[str],
        exclude_lanes: Sequence[str],
        concurrency: int,
    ) -> None:
        """Write (or rewrite) this worker's row."""
        ...

    def heartbeat(self, worker_id: str) -> bool:
        """Refresh the worker's heartbeat; ``False`` if its row was reaped."""
        ...

    def deregister(self, worker_id: str) -> None:
        """Delete the worker's row."""
        ...

    def reap(self, *, timeout: float) -> int:
        """Delete long-silent workers' rows; how many."""
        ...

    def cancellations(self, job_ids: Iterable[str]) -> set[str]:
        """Which of ``job_ids`` have a recorded cancellation intent."""
        ...

    def lanes_without_handler(self, handled: Sequence[str]) -> list[str]:
        """Lanes with queued work that are not in ``handled``."""
        ...

    def release_connection(self) -> None:
        """Close the calling thread's connection."""
        ...


class HousekeepingStore(Protocol):
    """The store verbs the worker's housekeeping (schedules, retention, statistics) calls.

    Each waits for a lock at most ``WATCHDOG['LOCK_TIMEOUT']`` and then raises
    ``LockBusy``, nothing changed.
    """

    def fire_schedule(
        self,
        name: str,
        *,
        now: datetime,
        due: Callable[[datetime], Sequence[datetime]],
        new_job: Callable[[datetime], NewJob],
    ) -> tuple[list[tuple[str, str]], datetime]:
        """Enqueue the schedule's due ticks once, under its lock: (job id, status) per tick,
        and the new ``handled_until``."""
        ...

    def prune(self, *, older_than: timedelta, now: datetime, max_batches: int | None = None) -> int:
        """Delete jobs settled before ``now - older_than``, behind the feed; how many."""
        ...

    def forget_idle_task_queues(self) -> int:
        """Delete a batch of task queue rows no job names; how many."""
        ...

    def analyze_unanalyzed(self, *, skip: Collection[str] = ()) -> Analyzed:
        """Analyze the tables the database has no statistics of, once big enough, but
        those in ``skip``; what it found."""
        ...


class LaneOptions(Protocol):
    """A lane's defaults, as registered with its handler."""

    @property
    def retry(self) -> RetryPolicy | None: ...

    @property
    def timeout(self) -> float | None: ...
