"""The store as the worker engine uses it: the verbs it needs, bound to one database."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import transaction

from ..domain.errors import WatchdogError
from ..domain.values import ClaimResult, Decision, ReconcileResult, SettleResult
from . import batches, claims, due, waits, workers
from .dialects import dialect
from .waits import LockBusy

__all__ = ["LockBusy", "WorkerStore"]


class WorkerStore:
    """Bound to one database alias; every method is one short transaction or less.

    No method waits longer than ``WATCHDOG['LOCK_TIMEOUT']`` for a lock another transaction
    holds (``store.waits``): one that would raises ``LockBusy`` (nothing changed), or, where
    the verb can go on without that lock, skips what it could not lock (``reconcile_all``:
    ``deferred`` results; ``promote_due``: other queues; ``reap``: nothing this time).
    Reads take no row locks on PostgreSQL, so they never wait on one.
    """

    def __init__(self, using: str) -> None:
        self.using = using

    def claim(
        self, partition: claims.Partition, *, worker_id: str, token: str | None = None
    ) -> ClaimResult:
        with waits.bounded():
            return claims.claim(self.using, partition, worker_id=worker_id, token=token)

    def settle(
        self,
        job_id: str,
        claim_token: str,
        decision: Decision,
        *,
        claim_next: claims.Partition | None = None,
        worker_id: str | None = None,
        token: str | None = None,
    ) -> tuple[SettleResult, ClaimResult | WatchdogError | None]:
        """Settle, and with ``claim_next`` claim the next job in the same transaction
        (under the token prefix ``token``)."""
        with waits.bounded():
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
        claim_next: claims.Partition | None = None,
        limit: int = 0,
        worker_id: str | None = None,
        token: str | None = None,
    ) -> tuple[list[SettleResult], list[ClaimResult | WatchdogError]]:
        """Settle a batch, release never-started jobs and claim up to ``limit`` (under the
        token prefix ``token``), in one transaction."""
        with waits.bounded():
            return batches.settle_and_claim(
                self.using,
                settlements,
                release=release,
                claim_next=claim_next,
                limit=limit,
                worker_id=worker_id,
                token=token,
            )

    def promote_due(self, *, now: datetime) -> int:
        try:
            with waits.bounded():
                return due.promote_due(self.using, now=now)
        except LockBusy:
            return 0  # the jobs enter on a later pass

    def next_due(self) -> datetime | None:
        return due.next_due(self.using)

    def retries_pending(self, partition: claims.Partition) -> bool:
        """Whether a job of the partition waits to be retried (``--burst`` waits for it)."""
        return due.retries_pending(self.using, partition.lanes, partition.exclude_lanes)

    def disappeared_claims(
        self,
        *,
        timeout: float,
        dead_workers: Sequence[str] = (),
        alive_workers: Sequence[str] = (),
    ) -> list[tuple[str, str]]:
        """Claims of workers silent for ``timeout`` (database clock), gone, or dead."""
        return claims.disappeared_claims(
            self.using, timeout=timeout, dead_workers=dead_workers, alive_workers=alive_workers
        )

    def claims_of(self, workers: Sequence[str]) -> list[tuple[str, str]]:
        return claims.claims_of(self.using, workers)

    def reconcile_all(self, found: Sequence[tuple[str, str]]) -> list[ReconcileResult]:
        """Reconcile each claim; one whose queue another transaction holds is ``deferred``."""
        with waits.bounded():
            return claims.reconcile_all(self.using, found)

    def release_lost_claims(
        self, worker_id: str, tokens: Sequence[str]
    ) -> tuple[list[str], list[tuple[str, str]]]:
        """Release the jobs that claims under these token prefixes took for ``worker_id``
        (committed while its connection failed, so never started): the ids released, and
        (job id, token prefix) of those whose queue another transaction held (try again)."""
        released: list[str] = []
        deferred: list[tuple[str, str]] = []
        for job_id, token in claims.lost_claims(self.using, worker_id, tokens):
            try:
                with waits.bounded():
                    if claims.release(self.using, job_id, token):
                        released.append(job_id)
            except LockBusy:
                deferred.append((job_id, token.rpartition(".")[0]))
        return released, deferred

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
        with waits.bounded(), transaction.atomic(using=self.using):
            dialect(self.using).bound_lock_waits()
            workers.register(
                self.using,
                worker_id,
                started_at=started_at,
                lanes=lanes,
                exclude_lanes=exclude_lanes,
                concurrency=concurrency,
            )

    def heartbeat(self, worker_id: str) -> bool:
        with waits.bounded(), transaction.atomic(using=self.using):
            dialect(self.using).bound_lock_waits()
            return workers.heartbeat(self.using, worker_id)

    def deregister(self, worker_id: str) -> None:
        with waits.bounded(), transaction.atomic(using=self.using):
            dialect(self.using).bound_lock_waits()
            workers.deregister(self.using, worker_id)

    def reap(self, *, timeout: float) -> int:
        """Delete long-silent workers' rows; 0 (try again later) if a row was locked."""
        try:
            with waits.bounded(), transaction.atomic(using=self.using):
                dialect(self.using).bound_lock_waits()
                return workers.reap(self.using, timeout=timeout)
        except LockBusy:
            return 0

    def cancellations(self, job_ids: Iterable[str]) -> set[str]:
        return workers.cancellations(self.using, job_ids)

    def lanes_without_handler(self, handled: Sequence[str]) -> list[str]:
        return workers.lanes_without_handler(self.using, handled)

    def release_connection(self) -> None:
        """Close this thread's connection, e.g. after the server went away."""
        from django.db import Error, connections

        try:
            connections[self.using].close()
        except Error:  # noqa: S110 - a broken connection may fail to close; it is gone
            pass
