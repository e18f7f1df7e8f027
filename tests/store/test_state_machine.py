"""The store against a small pure-Python model of SPEC §4 (Hypothesis stateful testing).

Rules drive enqueue (now or delayed) / promote due delayed jobs / cancel / claim / settle
(current, stale and bogus tokens; final or a retry) / batch claim and batch settle (one
transaction, ``store.batches``) / reconcile / recover / fail_lane /
purge / feed reads. After every step the invariants compare every job's state, outcome,
reason, recovery count, attempts, intent, token, delay and retry time, the order of the
jobs' queue positions, every queue head, the ready flags, and check that the settled feed,
read on from its cursors, has yielded each settled job exactly once in every lane partition.

Time: delayed jobs run after ``base + 1 day`` or later and waiting retries after ``base +
1 day``, so the wall clock never makes them due during an example; a retry due in the past
is claimable at once. ``promote`` promotes with ``now = base + 2 days``: every delayed job.

Each example starts from empty tables inside the test's transaction (pytest-django rolls
everything back at the end), so it runs the same way on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import django_watchdog as wd
from django_watchdog import JobConflict
from django_watchdog.domain.states import Outcome
from django_watchdog.domain.values import ClaimResult, Decision
from django_watchdog.models import FeedClock, Job, Queue, Worker
from django_watchdog.store.batches import Settlement
from django_watchdog.store.claims import Partition as Lanes
from django_watchdog.store.store import Store
from django_watchdog.store.worker_store import WorkerStore

JOB_IDS = tuple(f"j{index}" for index in range(8))
QUEUES = ("q1", "q2", "q3")
LANES = ("a", "b")
PRIORITIES = (-1, 0, 1)
BUDGETS = (None, 0, 1)
PAYLOADS: tuple[Any, ...] = (None, 1, True, {"k": "v"})
DECISIONS = {
    "completed": Decision.completed("r"),
    "failed": Decision.failed("E: boom"),
    "outcome_unknown": Decision.outcome_unknown(),
}
DAY = timedelta(days=1)
#: ``run_after`` offsets from the machine's base time: one already due, two far ahead (and
#: drawn repeatedly, so ties on ``run_after`` are common).
DELAYS = (-DAY, DAY, DAY + timedelta(hours=6))
#: ``retry_at`` offsets: claimable at once, or pinned at the head for the whole example.
RETRY_WAITS = {"past": -DAY, "future": DAY}
PROMOTE_AT = 2 * DAY
NO_POLICY = "Execution disappeared without a recovery policy"
TARGETS = 8  # target indexes; the last one names a job that does not exist
NEW_JOB = st.fixed_dictionaries(
    {
        "job_id": st.sampled_from(JOB_IDS),
        "queue": st.sampled_from(QUEUES),
        "lane": st.sampled_from(LANES),
        "priority": st.sampled_from(PRIORITIES),
        "payload": st.sampled_from(PAYLOADS),
        "budget": st.sampled_from(BUDGETS),
    }
)


@dataclass(frozen=True)
class Partition:
    claim: dict[str, Any]
    feed: dict[str, Any]
    lane: str | None = None
    exclude: str | None = None

    def holds(self, lane: str) -> bool:
        if self.lane is not None:
            return lane == self.lane
        return lane != self.exclude


PARTITIONS = {
    "all": Partition(claim={}, feed={}),
    "a": Partition(claim={"lanes": ["a"]}, feed={"lane": "a"}, lane="a"),
    "not-a": Partition(claim={"exclude_lanes": ["a"]}, feed={"exclude_lane": "a"}, exclude="a"),
}
WORKER_LANES = {
    "all": Lanes(),
    "a": Lanes(lanes=("a",)),
    "not-a": Lanes(exclude_lanes=("a",)),
}


def canonical(payload: Any) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


@dataclass
class ModelJob:
    pk: int
    seq: int  # enqueue order (the id sequence)
    job_id: str
    queue: str
    lane: str
    priority: int
    payload: Any
    max_recoveries: int | None
    run_after: datetime | None = None
    delayed: bool = False
    position: int | None = None  # place in the queue's order; None while delayed
    state: str = "queued"
    outcome: str | None = None
    reason: str | None = None
    recovery_count: int = 0
    attempts: int = 0
    retry_at: datetime | None = None
    cancellation_id: str | None = None
    token: str | None = None  # the claim_token column
    tokens: list[str] = field(default_factory=list)  # every token ever handed out
    feed: int | None = None  # the settled feed's position, once a feed read gave one

    @property
    def rank(self) -> tuple[int, int]:
        assert self.position is not None, f"{self.job_id} is not in its queue's order"
        return (-self.priority, self.position)

    def observed(self) -> tuple[Any, ...]:
        return (
            self.state,
            self.outcome,
            self.reason,
            self.recovery_count,
            self.attempts,
            self.cancellation_id,
            self.token,
            self.run_after,
            self.delayed,
            self.retry_at,
        )


@dataclass
class Reader:
    """A feed reader: its cursor and every job (pk) it has read so far."""

    cursor: str | None = None
    read: list[int] = field(default_factory=list)


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        for model in (Job, Queue, FeedClock, Worker):
            model.objects.all().delete()
        self.base = timezone.now()
        self.jobs: dict[str, ModelJob] = {}
        self.seq = 0  # the id sequence: enqueues and promotions both draw from it
        self.feed_clock = 0
        self.readers = {name: Reader() for name in PARTITIONS}
        self.checkers = {name: Reader() for name in PARTITIONS}

    # -- the model's derived views ---------------------------------------------------------

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def running(self, queue: str) -> ModelJob | None:
        return next(
            (j for j in self.jobs.values() if j.queue == queue and j.state == "running"), None
        )

    def in_order(self, queue: str) -> list[ModelJob]:
        """Queued jobs of ``queue`` in its order (delayed ones are not, until due)."""
        return [
            j
            for j in self.jobs.values()
            if j.queue == queue and j.state == "queued" and not j.delayed
        ]

    def retrying(self, queue: str) -> ModelJob | None:
        """The job waiting to retry: pinned as its queue's head (at most one per queue)."""
        waiting = [j for j in self.in_order(queue) if j.retry_at is not None]
        assert len(waiting) <= 1, f"two retrying jobs in {queue}"
        return waiting[0] if waiting else None

    def head_job(self, queue: str) -> ModelJob | None:
        return (
            self.running(queue)
            or self.retrying(queue)
            or min(self.in_order(queue), key=lambda j: j.rank, default=None)
        )

    def head(self, queue: str) -> tuple[str, str | None, bool]:
        job = self.head_job(queue)
        if job is None:
            return ("idle", None, False)
        return (job.state, job.job_id, job.cancellation_id is not None)

    def ready(self) -> list[ModelJob]:
        """Jobs with the ``ready`` flag: a retrying head has it even before its retry time."""
        heads = {q: self.head_job(q) for q in {j.queue for j in self.jobs.values()}}
        return [
            j
            for j in self.jobs.values()
            if j.state == "queued"
            and not j.delayed
            and (j.cancellation_id is not None or heads[j.queue] is j)
        ]

    def claimable(self) -> list[ModelJob]:
        """Ready jobs a claim may take now: a retry only once due, unless cancelled."""
        return [
            j
            for j in self.ready()
            if j.retry_at is None or j.retry_at <= self.base or j.cancellation_id is not None
        ]

    def position_feed(self) -> None:
        """What each feed read does first: number the new, undelayed jobs in id order."""
        for job in sorted(self.jobs.values(), key=lambda j: j.pk):
            if job.feed is None and not job.delayed:
                self.feed_clock += 1
                job.feed = self.feed_clock

    def feed_prefix(self, partition: Partition) -> list[ModelJob]:
        """Settled jobs of the partition in feed order, up to its first pending job."""
        self.position_feed()
        prefix = []
        numbered = sorted(
            (j for j in self.jobs.values() if j.feed is not None), key=lambda j: j.feed or 0
        )
        for job in numbered:
            if not partition.holds(job.lane):
                continue
            if job.state != "settled":
                break
            prefix.append(job)
        return prefix

    def target(self, index: int, *, claimed: bool = False, running_share: int = 4) -> str:
        """Mostly an existing job, sometimes a missing one. ``claimed``: for ``running_share``
        indexes in 8 a running job, else any job that was ever claimed (so settled ones get
        replays)."""
        if index >= TARGETS - 1:
            return "ghost"
        jobs = sorted(self.jobs.values(), key=lambda j: j.seq)
        if claimed:
            running = [j for j in jobs if j.state == "running"]
            jobs = running if running and index < running_share else [j for j in jobs if j.tokens]
        if not jobs:
            return "ghost"
        return jobs[index % len(jobs)].job_id

    def pick_token(self, job: ModelJob | None, pick: int) -> str:
        """0, 1: the latest token; 2: the first one (stale after a recovery); 3: bogus."""
        if job is None or not job.tokens or pick == 3:
            return "bogus-token"
        return job.tokens[0] if pick == 2 else job.tokens[-1]

    # -- rules -----------------------------------------------------------------------------

    @initialize(jobs=st.lists(NEW_JOB, min_size=2, max_size=6))
    def seed(self, jobs: list[dict[str, Any]]) -> None:
        """Start with a few jobs, so most steps act on something."""
        for job in jobs:
            self.add_job(**job)

    def add_job(
        self,
        job_id: str,
        queue: str,
        lane: str,
        priority: int,
        payload: Any,
        budget: int | None,
        run_after: datetime | None = None,
    ) -> None:
        kwargs = {
            "queue": queue,
            "lane": lane,
            "priority": priority,
            "payload": payload,
            "max_recoveries": budget,
        }
        prior = self.jobs.get(job_id)
        if prior is None:
            result = wd.enqueue(job_id, run_after=run_after, **kwargs)
            assert result.status == "queued"
            seq = self.next_seq()
            delayed = run_after is not None and run_after > self.base
            self.jobs[job_id] = ModelJob(
                pk=result.job.pk,
                seq=seq,
                job_id=job_id,
                run_after=run_after,
                delayed=delayed,
                position=None if delayed else seq,
                **kwargs,
            )
            return
        differing = tuple(
            name
            for name, same in (
                ("queue", prior.queue == queue),
                ("lane", prior.lane == lane),
                ("priority", prior.priority == priority),
                ("payload", canonical(prior.payload) == canonical(payload)),
                ("max_recoveries", prior.max_recoveries == budget),
                ("run_after", prior.run_after == run_after),
            )
            if not same
        )
        if differing:
            with pytest.raises(JobConflict) as caught:
                wd.enqueue(job_id, run_after=run_after, **kwargs)
            assert caught.value.fields == differing
        else:
            assert wd.enqueue(job_id, run_after=run_after, **kwargs).status == "duplicate"

    @rule(
        job_id=st.sampled_from(JOB_IDS),
        queue=st.sampled_from(QUEUES),
        lane=st.sampled_from(LANES),
        priority=st.sampled_from(PRIORITIES),
        payload=st.sampled_from(PAYLOADS),
        budget=st.sampled_from(BUDGETS),
    )
    def enqueue(
        self, job_id: str, queue: str, lane: str, priority: int, payload: Any, budget: int | None
    ) -> None:
        self.add_job(job_id, queue, lane, priority, payload, budget)

    @precondition(lambda self: len(self.jobs) < len(JOB_IDS))
    @rule(job=NEW_JOB)
    def enqueue_fresh(self, job: dict[str, Any]) -> None:
        """A job id not in use (the other enqueue rule mostly hits existing ids)."""
        job["job_id"] = next(j for j in JOB_IDS if j not in self.jobs)
        self.add_job(**job)

    @rule(job=NEW_JOB, delay=st.sampled_from(DELAYS), fresh=st.booleans())
    def enqueue_delayed(self, job: dict[str, Any], delay: timedelta, fresh: bool) -> None:
        """``run_after`` far ahead: delayed, outside the order; in the past: enqueued now."""
        if fresh and len(self.jobs) < len(JOB_IDS):
            job["job_id"] = next(j for j in JOB_IDS if j not in self.jobs)
        self.add_job(**job, run_after=self.base + delay)

    @precondition(lambda self: any(j.delayed for j in self.jobs.values()))
    @rule()
    def promote(self) -> None:
        """Every delayed job is due: each joins its queue's order behind everything enqueued
        before, oldest due first across queues (``run_after``, then enqueue order)."""
        due = sorted(
            (j for j in self.jobs.values() if j.delayed), key=lambda j: (j.run_after, j.seq)
        )
        assert Store().promote_due(now=self.base + PROMOTE_AT) == len(due)
        event(f"promote: {min(len(due), 3)}{'+' if len(due) >= 3 else ''} jobs")
        for job in due:
            job.delayed, job.position = False, self.next_seq()

    @precondition(lambda self: self.jobs)
    @rule(
        which=st.integers(0, TARGETS - 1),
        intent=st.sampled_from((None, "c1", "c2")),
        only_if_queued=st.booleans(),
    )
    def cancel(self, which: int, intent: str | None, only_if_queued: bool) -> None:
        job_id = self.target(which)
        result = wd.cancel(job_id, cancellation_id=intent, only_if_queued=only_if_queued)
        effective = intent or f"cancel:{job_id}"
        job = self.jobs.get(job_id)
        if job is None:
            expected = "missing"
        elif job.cancellation_id is not None:
            expected = "replayed" if job.cancellation_id == effective else "conflict"
        elif only_if_queued and job.state != "queued":
            expected = "conflict"
        elif any(other.cancellation_id == effective for other in self.jobs.values()):
            expected = "conflict"  # an intent id names one job's cancellation (as the seed)
        else:
            expected = "recorded"
            job.cancellation_id = effective
            if job.delayed:  # ready at once, in the place it was enqueued
                event("cancel: a delayed job")
                job.delayed, job.position = False, job.seq
        assert result.status == expected

    @precondition(lambda self: any(j.state == "queued" for j in self.jobs.values()))
    @rule(partition=st.sampled_from(sorted(PARTITIONS)))
    def claim(self, partition: str) -> None:
        self.claim_in(partition)

    def claim_in(self, partition: str) -> ModelJob | None:
        """Claim in ``partition``; the job now running, if any."""
        part = PARTITIONS[partition]
        ready = [j for j in self.claimable() if part.holds(j.lane)]
        result = Store().claim(Lanes(**part.claim))
        pinned = {
            j.queue
            for j in self.ready()
            if j.retry_at is not None and j.retry_at > self.base and j.cancellation_id is None
        }
        if pinned:
            event("claim: a retry waits at a head")
        if not ready:
            assert result.status == "none"
            return None
        best = min(ready, key=lambda j: j.rank)
        assert result.job is not None and result.job.job_id == best.job_id
        # A retry waiting at its queue's head blocks the queue (cancelled jobs still settle).
        assert best.queue not in pinned or best.cancellation_id is not None
        if best.retry_at is not None:
            event("claim: a due or cancelled retry")
        best.retry_at = None
        if best.cancellation_id is not None:
            assert result.status == "cancelled"
            best.state, best.outcome = "settled", "cancelled"
        else:
            assert result.status == "claimed" and result.claim_token
            best.state, best.token = "running", result.claim_token
            best.tokens.append(result.claim_token)
            best.attempts += 1
            return best
        return None

    def settle_as(self, job_id: str, pick: int, decision: Decision) -> None:
        token = self.pick_token(self.jobs.get(job_id), pick)
        result = Store().settle(job_id, token, decision)[0]
        self.check_settle(job_id, token, decision, result)

    def check_settle(self, job_id: str, token: str, decision: Decision, result: Any) -> None:
        """Compare one settle's result with the model's, and apply it to the model."""
        job = self.jobs.get(job_id)
        if job is None:
            assert result.status == "missing"
            return
        effective = "cancelled" if job.cancellation_id is not None else decision.outcome.value
        if job.state == "settled":
            same = token == job.token and job.outcome == effective
            assert result.status == ("replayed" if same else "conflict")
        elif job.state != "running" or token != job.token:
            assert result.status == "conflict"
        elif decision.retry_at is not None and effective == "failed":
            assert result.status == "retrying"
            event("settle: retrying")
            job.state, job.token, job.retry_at = "queued", None, decision.retry_at
        else:
            assert result.status == "settled"
            if decision.retry_at is not None:
                event("settle: a retry settles cancelled")
            job.state, job.outcome = "settled", effective
            job.reason = decision.failure_reason if effective == "failed" else None

    @precondition(lambda self: not any(j.cancellation_id for j in self.claimable()))
    @rule(partition=st.sampled_from(sorted(PARTITIONS)), limit=st.integers(1, 3))
    def claim_batch(self, partition: str, limit: int) -> None:
        """A batch claim takes the best ``limit`` ready jobs at once.

        Only without ready cancelled jobs: settling one may ready its queue's next head,
        which PostgreSQL's one-statement batch does not see but SQLite's loop does.
        """
        part = PARTITIONS[partition]
        ready = sorted((j for j in self.claimable() if part.holds(j.lane)), key=lambda j: j.rank)
        _, claimed = Store("default").settle_and_claim(
            [], claim_next=WORKER_LANES[partition], limit=limit, worker_id="w"
        )
        expected = ready[:limit]
        assert [r.job.job_id for r in claimed if isinstance(r, ClaimResult) and r.job] == [
            j.job_id for j in expected
        ]
        if len(expected) > 1:
            event("claim_batch: several jobs")
        for job, result in zip(expected, claimed, strict=True):
            assert isinstance(result, ClaimResult) and result.claim_token
            job.retry_at = None
            job.state, job.token = "running", result.claim_token
            job.tokens.append(result.claim_token)
            job.attempts += 1

    @precondition(lambda self: any(j.tokens for j in self.jobs.values()))
    @rule(
        picks=st.lists(
            st.tuples(
                st.integers(0, TARGETS - 1),
                st.integers(min_value=0, max_value=3),
                st.sampled_from(sorted(DECISIONS)),
            ),
            min_size=1,
            max_size=3,
        )
    )
    def settle_batch(self, picks: list[tuple[int, int, str]]) -> None:
        """Settling several jobs in one transaction is settling each (they are distinct)."""
        chosen: dict[str, Settlement] = {}
        for which, pick, decision in picks:
            job_id = self.target(which, claimed=True)
            token = self.pick_token(self.jobs.get(job_id), pick)
            chosen.setdefault(job_id, Settlement(job_id, token, DECISIONS[decision]))
        settlements = list(chosen.values())
        results, _ = Store("default").settle_and_claim(settlements)
        if len(settlements) > 1:
            event("settle_batch: several jobs")
        for settlement, result in zip(settlements, results, strict=True):
            self.check_settle(
                settlement.job_id, settlement.claim_token, settlement.decision, result
            )

    @precondition(lambda self: any(j.tokens for j in self.jobs.values()))
    @rule(
        which=st.integers(0, TARGETS - 1),
        pick=st.integers(min_value=0, max_value=3),
        decision=st.sampled_from(sorted(DECISIONS)),
    )
    def settle(self, which: int, pick: int, decision: str) -> None:
        self.settle_as(self.target(which, claimed=True), pick, DECISIONS[decision])

    @precondition(lambda self: any(j.tokens for j in self.jobs.values()))
    @rule(
        which=st.integers(0, TARGETS - 1),
        pick=st.integers(min_value=0, max_value=3),
        wait=st.sampled_from(sorted(RETRY_WAITS)),
    )
    def settle_retry(self, which: int, pick: int, wait: str) -> None:
        """A failure to run again: back to the head of its queue, due now or far ahead."""
        job_id = self.target(which, claimed=True, running_share=6)
        self.settle_as(job_id, pick, self.retry_decision(wait))

    def retry_decision(self, wait: str) -> Decision:
        retry_at = self.base + RETRY_WAITS[wait]
        return Decision(outcome=Outcome.FAILED, failure_reason="E: again", retry_at=retry_at)

    @precondition(lambda self: any(j.state == "queued" for j in self.jobs.values()))
    @rule(partition=st.sampled_from(sorted(PARTITIONS)), wait=st.sampled_from(sorted(RETRY_WAITS)))
    def run_and_retry(self, partition: str, wait: str) -> None:
        """A worker's round: claim, the handler fails, the job waits to run again."""
        job = self.claim_in(partition)
        if job is not None:
            self.settle_as(job.job_id, 0, self.retry_decision(wait))

    def _reconcile_model(self, job: ModelJob) -> str:
        if job.cancellation_id is None and (
            job.max_recoveries is not None and job.recovery_count < job.max_recoveries
        ):
            job.state, job.token = "queued", None
            job.recovery_count += 1
            return "requeued"
        job.state = "settled"
        if job.cancellation_id is not None:
            job.outcome, job.reason = "cancelled", None
        elif job.max_recoveries is None:
            job.outcome, job.reason = "interrupted", NO_POLICY
        else:
            job.outcome = "interrupted"
            job.reason = f"Restart recovery budget exhausted ({job.max_recoveries} recoveries)"
        return "settled"

    @precondition(lambda self: any(j.tokens for j in self.jobs.values()))
    @rule(which=st.integers(0, TARGETS - 1), pick=st.integers(min_value=0, max_value=3))
    def reconcile(self, which: int, pick: int) -> None:
        job_id = self.target(which, claimed=True)
        job = self.jobs.get(job_id)
        token = self.pick_token(job, pick)
        result = Store().reconcile(job_id, token)
        if job is None:
            assert result.status == "missing"
        elif job.state != "running" or token != job.token:
            assert result.status == "conflict"
        else:
            assert result.status == self._reconcile_model(job)

    @precondition(lambda self: any(j.state == "running" for j in self.jobs.values()))
    @rule()
    def recover(self) -> None:
        """No worker has a heartbeat: every running job disappeared."""
        running = sorted(
            (j for j in self.jobs.values() if j.state == "running"), key=lambda j: j.seq
        )
        results = Store().recover(timeout=30)
        expected = [(job.job_id, self._reconcile_model(job)) for job in running]
        assert [(r.job.job_id, r.status) for r in results if r.job] == expected

    @precondition(lambda self: any(j.state != "settled" for j in self.jobs.values()))
    @rule(lane=st.sampled_from(LANES))
    def fail_lane(self, lane: str) -> None:
        pending = [j for j in self.jobs.values() if j.lane == lane and j.state != "settled"]
        pending.sort(key=lambda j: (j.state != "running", j.seq))
        failure = wd.fail_lane(lane, "lane down")
        assert [job.job_id for job in failure.jobs] == [job.job_id for job in pending]
        assert failure.more is False
        for job in pending:
            job.state, job.outcome, job.reason, job.token = "settled", "failed", "lane down", None
            job.retry_at = None
            if job.delayed:  # settles where it was enqueued
                job.delayed, job.position = False, job.seq

    @precondition(lambda self: any(j.state == "queued" for j in self.jobs.values()))
    @rule(queue=st.sampled_from(QUEUES))
    def purge(self, queue: str) -> None:
        doomed = [j for j in self.jobs.values() if j.queue == queue and j.state == "queued"]
        assert wd.purge_queued(queue) == len(doomed)
        for job in doomed:
            del self.jobs[job.job_id]

    @rule(partition=st.sampled_from(sorted(PARTITIONS)), limit=st.integers(1, 3))
    def read_feed(self, partition: str, limit: int) -> None:
        """One page from the reader's cursor is exactly the model's next jobs."""
        reader = self.readers[partition]
        prefix = [job.pk for job in self.feed_prefix(PARTITIONS[partition])]
        assert prefix[: len(reader.read)] == reader.read
        expected = prefix[len(reader.read) :][:limit]
        page = wd.settled_jobs(reader.cursor, limit, **PARTITIONS[partition].feed)
        assert [record.job.pk for record in page] == expected
        if page:
            reader.cursor = page[-1].cursor
            reader.read += expected

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def jobs_match(self) -> None:
        stored = {
            job_id: rest
            for job_id, *rest in Job.objects.values_list(
                "job_id",
                "state",
                "outcome",
                "failure_reason",
                "recovery_count",
                "attempts",
                "cancellation_id",
                "claim_token",
                "run_after",
                "delayed",
                "retry_at",
            )
        }
        assert stored == {j.job_id: list(j.observed()) for j in self.jobs.values()}

    @invariant()
    def positions_match(self) -> None:
        """Stored positions sort the jobs as the model's do; delayed jobs have none."""
        stored = dict(Job.objects.values_list("job_id", "position"))
        assert {k for k, v in stored.items() if v is None} == {
            j.job_id for j in self.jobs.values() if j.position is None
        }
        placed = [j for j in self.jobs.values() if j.position is not None]
        assert sorted((j.job_id for j in placed), key=lambda k: stored[k]) == [
            j.job_id for j in sorted(placed, key=lambda j: j.position or 0)
        ]

    @invariant()
    def due_times_match(self) -> None:
        """When the worker looks again, and whether a partition has a retry pending."""
        store = WorkerStore("default")
        waiting = [j.run_after for j in self.jobs.values() if j.delayed]
        waiting += [j.retry_at for j in self.jobs.values() if j.retry_at is not None]
        assert store.next_due() == min((t for t in waiting if t is not None), default=None)
        for name, partition in PARTITIONS.items():
            pending = any(
                j.retry_at is not None and partition.holds(j.lane) for j in self.jobs.values()
            )
            assert store.retries_pending(WORKER_LANES[name]) == pending

    @invariant()
    def latest_settled_match(self) -> None:
        """As the seed: the settled job latest in its queue's order, not the last to settle."""
        for queue in QUEUES:
            settled = [j for j in self.jobs.values() if j.queue == queue and j.state == "settled"]
            latest = max(settled, key=lambda j: j.position or 0, default=None)
            found = wd.latest_settled(queue)
            assert (found.job_id if found else None) == (latest.job_id if latest else None)

    @invariant()
    def heads_match(self) -> None:
        for queue in QUEUES:
            head = wd.queue_head(queue)
            assert (head.state, head.job_id, head.cancellation_requested) == self.head(queue)

    @invariant()
    def ready_flags_match(self) -> None:
        stored = set(Job.objects.filter(ready=True).values_list("job_id", flat=True))
        assert stored == {job.job_id for job in self.ready()}

    @invariant()
    def feed_yields_each_settled_job_exactly_once(self) -> None:
        for name, partition in PARTITIONS.items():
            checker = self.checkers[name]
            # Fewer than the limit: this page reached the horizon, nothing more to read.
            page = wd.settled_jobs(checker.cursor, 256, **partition.feed)
            if page:
                checker.cursor = page[-1].cursor
                checker.read += [record.job.pk for record in page]
            assert checker.read == [job.pk for job in self.feed_prefix(partition)]


@pytest.mark.django_db
@pytest.mark.timeout(900)  # a failure shrinks for up to 5 minutes: let it report the example
def test_store_follows_the_model() -> None:
    run_state_machine_as_test(
        StoreMachine,
        settings=settings(
            max_examples=40,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


@pytest.mark.django_db
def test_an_enqueue_after_a_promotion_of_two_keeps_the_models_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A failing example, replayed (``@example`` does not fit a state machine): on MariaDB
    the second promoted job once took a place after the job enqueued next. Outside a
    Hypothesis run there are no events to record."""
    monkeypatch.setattr(f"{__name__}.event", lambda *args, **kwargs: None)
    machine = StoreMachine()
    job = {"queue": "q1", "lane": "a", "priority": 0, "payload": None, "budget": None}
    machine.enqueue("j0", **job)
    machine.cancel(which=0, intent=None, only_if_queued=False)
    machine.enqueue_delayed({**job, "job_id": "j1"}, delay=DAY, fresh=False)
    machine.enqueue_delayed({**job, "job_id": "j2"}, delay=DAY, fresh=False)
    machine.promote()
    machine.enqueue_delayed({**job, "job_id": "j3"}, delay=-DAY, fresh=False)
    machine.positions_match()
    machine.heads_match()
    machine.ready_flags_match()
    machine.teardown()
