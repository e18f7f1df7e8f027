"""The store as the worker engine uses it: the verbs it needs, bound to one database."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

from ..domain.errors import WatchdogError
from ..domain.values import ClaimResult, Decision, ReconcileResult, SettleResult
from . import batches, claims, due, workers


class WorkerStore:
    """Bound to one database alias; every method is one short transaction or less."""

    def __init__(self, using: str) -> None:
        self.using = using

    def claim(self, partition: claims.Partition, *, worker_id: str) -> ClaimResult:
        return claims.claim(self.using, partition, worker_id=worker_id)

    def settle(
        self,
        job_id: str,
        claim_token: str,
        decision: Decision,
        *,
        claim_next: claims.Partition | None = None,
        worker_id: str | None = None,
    ) -> tuple[SettleResult, ClaimResult | WatchdogError | None]:
        """Settle, and with ``claim_next`` claim the next job in the same transaction."""
        return claims.settle(
            self.using, job_id, claim_token, decision, claim_next=claim_next, worker_id=worker_id
        )

    def settle_and_claim(
        self,
        settlements: Sequence[batches.Settlement],
        *,
        release: Sequence[tuple[str, str]] = (),
        claim_next: claims.Partition | None = None,
        limit: int = 0,
        worker_id: str | None = None,
    ) -> tuple[list[SettleResult], list[ClaimResult | WatchdogError]]:
        """Settle a batch, release never-started jobs and claim up to ``limit``, in one
        transaction."""
        return batches.settle_and_claim(
            self.using,
            settlements,
            release=release,
            claim_next=claim_next,
            limit=limit,
            worker_id=worker_id,
        )

    def promote_due(self, *, now: datetime) -> int:
        return due.promote_due(self.using, now=now)

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
        return claims.reconcile_all(self.using, found)

    def release_orphans(self, worker_id: str, known: Sequence[str]) -> list[str]:
        """Release claims committed for ``worker_id`` that it never learnt of; their ids."""
        released = []
        for job_id, token in claims.orphaned_claims(self.using, worker_id, known):
            if claims.release(self.using, job_id, token):
                released.append(job_id)
        return released

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
        workers.register(
            self.using,
            worker_id,
            started_at=started_at,
            lanes=lanes,
            exclude_lanes=exclude_lanes,
            concurrency=concurrency,
        )

    def heartbeat(self, worker_id: str) -> bool:
        return workers.heartbeat(self.using, worker_id)

    def deregister(self, worker_id: str) -> None:
        workers.deregister(self.using, worker_id)

    def reap(self, *, timeout: float) -> int:
        return workers.reap(self.using, timeout=timeout)

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
