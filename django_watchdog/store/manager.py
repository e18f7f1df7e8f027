"""``Job.objects``: the verbs of SPEC §4, each one atomic, on the manager's database."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import models, router

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
from . import claims, due, feed, heads, intents, lanes, reruns
from .enqueue import NewJob
from .enqueue import enqueue as enqueue_job
from .enqueue import enqueue_many as enqueue_jobs

if TYPE_CHECKING:
    from ..models import Job


class JobQuerySet(models.QuerySet["Job"]):
    """Read-only, composable filters."""

    def pending(self) -> JobQuerySet:
        return self.filter(state__in=("queued", "running"))

    def settled(self) -> JobQuerySet:
        return self.filter(state="settled")

    def in_queue(self, queue: str) -> JobQuerySet:
        return self.filter(queue=queue)

    def in_lane(self, lane: str) -> JobQuerySet:
        return self.filter(lane=lane)


class JobManager(models.Manager["Job"]):
    """The store's verbs. Inputs are already validated (see ``django_watchdog.api``)."""

    def get_queryset(self) -> JobQuerySet:
        return JobQuerySet(self.model, using=self._db)

    @property
    def database(self) -> str:
        """The alias this manager's verbs write to."""
        return self._db or router.db_for_write(self.model)

    def enqueue(self, new: NewJob) -> EnqueueResult:
        return enqueue_job(self.database, new)

    def enqueue_many(self, batch: Sequence[NewJob]) -> list[EnqueueResult]:
        return enqueue_jobs(self.database, batch)

    def cancel(
        self,
        job_id: str,
        cancellation_id: str,
        *,
        only_if_queued: bool,
        requested_by: str | None = None,
    ) -> CancelResult:
        return intents.cancel(
            self.database,
            job_id,
            cancellation_id,
            only_if_queued=only_if_queued,
            requested_by=requested_by,
        )

    def rerun(
        self, job_id: str, *, rerun_id: str | None = None, requested_by: str | None = None
    ) -> EnqueueResult:
        return reruns.rerun(self.database, job_id, rerun_id=rerun_id, requested_by=requested_by)

    def claim(
        self,
        *,
        lanes: Sequence[str] = (),
        exclude_lanes: Sequence[str] = (),
        worker_id: str | None = None,
    ) -> ClaimResult:
        partition = claims.Partition(lanes=tuple(lanes), exclude_lanes=tuple(exclude_lanes))
        return claims.claim(self.database, partition, worker_id=worker_id)

    def settle(self, job_id: str, claim_token: str, decision: Decision) -> SettleResult:
        return claims.settle(self.database, job_id, claim_token, decision)[0]

    def reconcile(self, job_id: str, claim_token: str) -> ReconcileResult:
        return claims.reconcile(self.database, job_id, claim_token)

    def promote_due(self, *, now: datetime) -> int:
        """Give delayed jobs that are due their place in their queues' order."""
        return due.promote_due(self.database, now=now)

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
        return claims.recover(
            self.database,
            timeout=timeout,
            dead_workers=dead_workers,
            alive_workers=alive_workers,
        )

    def fail_lane(self, lane: str, reason: str) -> LaneFailure:
        return lanes.fail_lane(self.database, lane, reason)

    def purge_queued(self, queue: str) -> int:
        return lanes.purge_queued(self.database, queue)

    def settled_after(
        self,
        after: int,
        limit: int,
        *,
        lanes: Sequence[str] = (),
        exclude_lanes: Sequence[str] = (),
    ) -> list[SettledRecord]:
        return feed.settled_after(
            self.database, after, limit, lanes=lanes, exclude_lanes=exclude_lanes
        )

    def queue_head(self, queue: str) -> QueueHead:
        return heads.read(self.database, queue)

    def latest_settled(self, queue: str) -> Job | None:
        """The settled job of ``queue`` latest in its order (highest ``position``), as the
        seed's highest sequence: not the one that settled last, when a later job overtook."""
        return (
            self.get_queryset().filter(queue=queue, state="settled").order_by("-position").first()
        )

    def has_pending_work(self, **filters: Any) -> bool:
        return self.get_queryset().pending().filter(**filters).exists()
