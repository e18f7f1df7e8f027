"""Claim and settle: the running half of a job's life (SPEC §4.3–4.5).

Every verb locks the job's queue first, then changes the job with a conditional update
on (job, state, claim token): zero rows is a reported conflict, never an overwrite.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from django.db import connections, transaction
from django.db.models.functions import Now
from django.utils import timezone

from ..domain.errors import WatchdogError
from ..domain.states import Outcome, State
from ..domain.validation import REASON_MAX
from ..domain.values import ClaimResult, Decision, QueueHead, SettleResult
from ..models import Job
from . import deadlocks, heads, rows
from .dialects import WAKE_EVERY_LANE, LaneTerms, QuietLanes, dialect, lane_terms

CLAIM_ATTEMPTS = 4


@dataclass(frozen=True, kw_only=True, slots=True)
class Partition:
    """The lanes a worker serves: only ``lanes`` (if any), never ``exclude_lanes``. Both
    are held as tuples, whatever sequence was given, so a partition is hashable: what a
    claim derives from it is made once per partition."""

    lanes: tuple[str, ...] = ()
    exclude_lanes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "lanes", tuple(self.lanes))
        object.__setattr__(self, "exclude_lanes", tuple(self.exclude_lanes))


@lru_cache(maxsize=256)
def quiet_lanes(claim_next: Partition | None) -> QuietLanes:
    """The lanes a settle need not wake, for a worker that claims on from ``claim_next`` in
    the same transaction (``None``: it claims nothing, so every lane is woken): the lanes it
    serves, as it takes a head it readies there, or a better job, itself. ``NOTIFY`` makes
    PostgreSQL commit notifying transactions one at a time, which would cap the drain of
    busy workers announcing their own work."""
    if claim_next is None:
        return WAKE_EVERY_LANE
    never = claim_next.exclude_lanes
    if claim_next.lanes:
        return QuietLanes(only=tuple(lane for lane in claim_next.lanes if lane not in never))
    return QuietLanes(every_lane_but=never)


def new_claim_token() -> str:
    """A claim's token prefix: each job it claims gets ``<prefix>.<rank>``.

    A caller that makes the prefix before claiming knows, if the claim fails, exactly
    which rows it may have claimed unseen (``lost_claims``).
    """
    return secrets.token_urlsafe(24)


def claim(
    using: str,
    partition: Partition,
    *,
    worker_id: str | None = None,
    token: str | None = None,
) -> ClaimResult:
    """Take the best ready job of the partition: run it, or settle it if it was cancelled.

    On PostgreSQL the candidate's queue row is locked with SKIP LOCKED, so concurrent
    claimers spread over queues instead of waiting on each other; a claim that passed a
    claimable job over that way tries again, up to ``CLAIM_ATTEMPTS`` statements. ``token``:
    the claim's token prefix (a fresh one if ``None``); of the attempts, only one writes a row.
    """
    token = token or new_claim_token()
    for _ in range(CLAIM_ATTEMPTS):
        taken, passed_over = claim_attempt(using, partition, worker_id, token)
        if taken:
            if isinstance(taken[0], WatchdogError):
                raise taken[0]
            return taken[0]
        if not passed_over:
            break
    return ClaimResult(status="none")


@deadlocks.retried
def claim_attempt(
    using: str, partition: Partition, worker_id: str | None, token: str
) -> tuple[list[ClaimResult | WatchdogError], bool]:
    """One of ``claim``'s attempts (``take_ready``), in the transaction a claim needs."""
    with claim_transaction(using):
        return take_ready(using, partition, 1, worker_id, token=token)


def claim_transaction(using: str) -> AbstractContextManager[Any]:
    """The transaction a claim needs (the dialect's: none where the claim is one statement
    and no ``queue_changed`` receiver needs one)."""
    return dialect(using).claim_transaction(announcing=heads.listening())


@lru_cache(maxsize=256)
def _lanes(partition: Partition) -> tuple[LaneTerms, Mapping[str, str]]:
    """The partition's lane terms and the parameters they bind, made once per partition
    (a worker claims from one partition for its whole life); read-only, as shared."""
    terms, params = lane_terms(partition.lanes, partition.exclude_lanes)
    return terms, MappingProxyType(params)


def ready_probe(using: str, partition: Partition) -> tuple[object, ...] | None:
    """The row the idle worker's probe read (``probe_sql``; ``None``: no row). Where the
    dialect wakes by probing (``Dialect.WAKE == "probe"``) a value that was not there in
    the last row read is news: a new best ready job, a new next due time."""
    found = dialect(using).fetch(*probe_statement(using, partition))
    return tuple(found[0]) if found else None


def probe_statement(using: str, partition: Partition) -> tuple[str, dict[str, Any]]:
    """The idle worker's probe with its params (what the index test EXPLAINs)."""
    terms, params = _lanes(partition)
    d = dialect(using)
    return d.probe_sql(terms), {**params, "now": d.param_datetime(timezone.now())}


def claim_statement(
    using: str,
    partition: Partition,
    *,
    token: str = "",
    worker_id: str | None = None,
    limit: int = 1,
) -> tuple[str, dict[str, Any]]:
    """The statement that takes up to ``limit`` of the best ready jobs, with its params.

    Each claim token is ``token`` plus the job's rank in the claim. The index test
    EXPLAINs exactly this, so a refactor cannot silently make claims scan.
    """
    terms, bound = _claim_terms(using, partition, token, worker_id, limit)
    return dialect(using).claim_sql(terms, limit), bound


def _claim_terms(
    using: str, partition: Partition, token: str, worker_id: str | None, limit: int
) -> tuple[LaneTerms, dict[str, Any]]:
    """The partition's lane terms and the claim's parameters."""
    terms, params = _lanes(partition)
    now = dialect(using).param_datetime(timezone.now())
    return terms, {**params, "now": now, "limit": limit, "token": token, "worker_id": worker_id}


def claim_in_transaction(
    using: str, partition: Partition, worker_id: str | None, *, token: str | None = None
) -> ClaimResult | WatchdogError | None:
    """One claim inside the caller's transaction; ``None`` when no ready job was taken."""
    taken, _ = take_ready(using, partition, 1, worker_id, token=token)
    return taken[0] if taken else None


def claim_ready(
    using: str,
    partition: Partition,
    limit: int,
    worker_id: str | None,
    *,
    token: str | None = None,
) -> list[ClaimResult | WatchdogError]:
    """Take up to ``limit`` ready jobs in one statement, best first, under the token
    prefix ``token`` (a fresh one if ``None``)."""
    taken, _ = take_ready(using, partition, limit, worker_id, token=token)
    return taken


def take_ready(
    using: str,
    partition: Partition,
    limit: int,
    worker_id: str | None,
    *,
    token: str | None = None,
) -> tuple[list[ClaimResult | WatchdogError], bool]:
    """``claim_ready``, and whether, having taken nothing, the claim passed over a job that
    looked claimable (a locked queue, a row another claim changed first): worth a retry."""
    terms, params = _claim_terms(using, partition, token or new_claim_token(), worker_id, limit)
    return _took(using, dialect(using).claim(terms, params))


def _took(
    using: str, found: Sequence[Sequence[Any]]
) -> tuple[list[ClaimResult | WatchdogError], bool]:
    """``take_ready``'s answer from the rows the claim statement returned."""
    pk = rows.column_index("id")
    taken = [row for row in found if row[pk] is not None]
    if len(taken) > 1:
        priority, position = rows.column_index("priority"), rows.column_index("position")
        taken.sort(key=lambda row: (-row[priority], row[position] or 0, row[pk]))
    return [_taken(using, row) for row in taken], len(taken) < len(found)


def _taken(using: str, row: Sequence[Any]) -> ClaimResult | WatchdogError:
    """The claim result of one row a claim statement changed."""
    try:
        job = rows.to_job(using, row)
    except WatchdogError as error:
        if error.kind == "store_unavailable":
            return _quarantine(using, row, error)
        raise
    if job.state == State.SETTLED:
        with transaction.atomic(using=using):  # the claim may have run in autocommit
            dialect(using).lock_queue(job.queue)
            head = heads.refresh(using, job.queue)
            heads.announce(job.queue, head, job, using=using)
        return ClaimResult(status="cancelled", job=job)
    if heads.listening():
        head = QueueHead(
            state="running",
            job_id=job.job_id,
            cancellation_requested=job.cancellation_id is not None,
        )
        heads.announce(job.queue, head, using=using)
    return ClaimResult(status="claimed", job=job, claim_token=job.claim_token)


def _quarantine(using: str, row: Sequence[Any], error: WatchdogError) -> WatchdogError:
    """Settle a claimed row we cannot decode ``failed``, so workers move on; report it.

    ``queue_changed`` is sent with the new head and ``settled=None`` (the row is no ``Job``).
    """

    pk = row[rows.column_index("id")]
    queue = row[rows.column_index("queue")]
    reason = f"Job row does not decode: {error}"[:REASON_MAX]
    with transaction.atomic(using=using):  # the claim may have run in autocommit
        dialect(using).lock_queue(str(queue))
        Job.objects.using(using).filter(pk=pk, state=State.RUNNING).update(
            state=State.SETTLED,
            outcome=Outcome.FAILED,
            failure_reason=reason,
            ready=False,
            settled_at=Now(),
        )
        head = heads.refresh(using, str(queue))
        # Like every change, inside its transaction; the row cannot be a Job, so no settled.
        heads.announce(str(queue), head, using=using)
    return error


@deadlocks.retried
def settle(
    using: str,
    job_id: str,
    claim_token: str,
    decision: Decision,
    *,
    claim_next: Partition | None = None,
    worker_id: str | None = None,
    token: str | None = None,
) -> tuple[SettleResult, ClaimResult | WatchdogError | None]:
    """Settle a running job for the holder of its current claim token (fencing).

    A failure with ``retry_at`` goes back to its queue, pinned at the head until then.
    With ``claim_next``, the next ready job of that partition is claimed in the same
    transaction (one commit per job for a busy worker), whatever the settle found; a row
    that did not decode comes back as the ``WatchdogError`` it raised, already settled
    ``failed``. A caller in autocommit with no ``queue_changed`` receiver gets that
    transaction as the database's own where the dialect has one (on PostgreSQL, one
    exchange: ``Dialect.settle_and_claim_alone``).
    """
    busy = quiet_lanes(claim_next)
    if claim_next is not None and _alone(using, decision):
        together = _settle_and_claim_alone(
            using, job_id, claim_token, decision, claim_next, busy, worker_id, token
        )
        if together is not None:
            return together
    with transaction.atomic(using=using):
        settled = settle_in_transaction(using, job_id, claim_token, decision, quiet=busy)
        claimed = None
        if claim_next is not None:
            claimed = claim_in_transaction(using, claim_next, worker_id, token=token)
    return settled, claimed


def settle_in_transaction(
    using: str,
    job_id: str,
    claim_token: str,
    decision: Decision,
    *,
    quiet: QuietLanes = WAKE_EVERY_LANE,
) -> SettleResult:
    d = dialect(using)
    queue = d.lock_queue_of(job_id)
    if queue is None:
        return SettleResult(status="missing")
    if decision.retry_at is not None and decision.outcome == Outcome.FAILED:
        changed = d.retry(
            {
                "retry_at": d.param_datetime(decision.retry_at),
                "traceback": decision.traceback,
                "job_id": job_id,
                "claim_token": claim_token,
            },
        )
        if not changed:
            return unchanged(using, job_id, claim_token, decision)
        job = rows.to_job(using, changed[0], as_stored=True)
        head = heads.refresh(using, queue)
        if job.state == State.QUEUED:
            heads.announce(queue, head, using=using)
            return SettleResult(status="retrying", job=job)
        heads.announce(queue, head, job, using=using)
        return SettleResult(status="settled", job=job)
    params = _settle_params(using, job_id, claim_token, decision)
    return _settled(
        using, job_id, claim_token, decision, d.settle_and_refresh(params, queue, quiet)
    )


def _settle_params(using: str, job_id: str, claim_token: str, decision: Decision) -> dict[str, Any]:
    """``SETTLE``'s parameters for a decision that is not a retry."""
    reason = decision.failure_reason if decision.outcome == Outcome.FAILED else None
    if decision.outcome == Outcome.FAILED and not reason:
        reason = "Failed without a reason"
    return {
        "outcome": decision.outcome.value,
        "reason": reason,
        "result": dialect(using).param_json(decision.result),
        "traceback": decision.traceback,
        "job_id": job_id,
        "claim_token": claim_token,
    }


def _settled(
    using: str,
    job_id: str,
    claim_token: str,
    decision: Decision,
    found: tuple[Sequence[Any], Sequence[Any] | None] | None,
) -> SettleResult:
    """The result of ``Dialect.settle_and_refresh``'s answer ``found``, announced."""
    if found is None:
        return unchanged(using, job_id, claim_token, decision)
    row, head_row = found
    job = rows.to_job(using, row, as_stored=True)
    heads.announce(job.queue, heads.head_of(head_row), job, using=using)
    return SettleResult(status="settled", job=job)


def _alone(using: str, decision: Decision) -> bool:
    """Whether a settle that claims on may run as a transaction of the database's own: the
    caller has none open, no ``queue_changed`` receiver must run inside it, and it is no
    retry (which goes back to its queue by its own statement)."""
    if decision.retry_at is not None and decision.outcome == Outcome.FAILED:
        return False
    connection = connections[using]
    if connection.in_atomic_block or not connection.get_autocommit():
        return False
    return not heads.listening()


def _settle_and_claim_alone(
    using: str,
    job_id: str,
    claim_token: str,
    decision: Decision,
    claim_next: Partition,
    quiet: QuietLanes,
    worker_id: str | None,
    token: str | None,
) -> tuple[SettleResult, ClaimResult | WatchdogError | None] | None:
    """``settle`` with ``claim_next`` as one transaction of the database's own where the
    dialect has one (``Dialect.settle_and_claim_alone``); ``None`` where it has not
    (nothing was sent)."""
    terms, claim_params = _claim_terms(using, claim_next, token or new_claim_token(), worker_id, 1)
    params = _settle_params(using, job_id, claim_token, decision)
    answers = dialect(using).settle_and_claim_alone(params, quiet, terms, claim_params)
    if answers is None:
        return None
    found, claim_rows = answers
    taken, _ = _took(using, claim_rows)
    settled = _settled(using, job_id, claim_token, decision, found)
    return settled, (taken[0] if taken else None)


def unchanged(using: str, job_id: str, claim_token: str, decision: Decision) -> SettleResult:
    """Why a fenced settle changed nothing: ``replayed``, ``conflict`` or ``missing``."""

    d = dialect(using)
    prior = d.fetch(d.PRIOR, {"job_id": job_id})
    if not prior:
        return SettleResult(status="missing")
    state, outcome, token, cancellation_id = prior[0]
    effective = Outcome.CANCELLED if cancellation_id is not None else decision.outcome
    if state == State.SETTLED and token == claim_token and outcome == effective:
        return SettleResult(status="replayed", job=Job.objects.using(using).get(job_id=job_id))
    return SettleResult(status="conflict")
