"""The store against a small pure-Python model of SPEC §4 (Hypothesis stateful testing).

Rules drive enqueue / cancel / claim / settle (current, stale and bogus tokens) / reconcile /
recover / fail_lane / purge / feed reads. After every step the invariants compare every
job's state, outcome, reason, recovery count, intent and token, every queue head, the ready
flags, and check that the settled feed, read on from its cursors, has yielded each settled
job exactly once in every lane partition.

Each example starts from empty tables inside the test's transaction (pytest-django rolls
everything back at the end), so it runs the same way on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, settings
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
from django_watchdog.domain.values import Decision
from django_watchdog.models import FeedClock, Job, Queue, Worker

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


def canonical(payload: Any) -> str:
    return json.dumps(payload, sort_keys=True, separators=(",", ":"))


@dataclass
class ModelJob:
    pk: int
    seq: int
    job_id: str
    queue: str
    lane: str
    priority: int
    payload: Any
    max_recoveries: int | None
    state: str = "queued"
    outcome: str | None = None
    reason: str | None = None
    recovery_count: int = 0
    cancellation_id: str | None = None
    token: str | None = None  # the claim_token column
    tokens: list[str] = field(default_factory=list)  # every token ever handed out

    @property
    def rank(self) -> tuple[int, int]:
        return (-self.priority, self.seq)

    def observed(self) -> tuple[Any, ...]:
        return (
            self.state,
            self.outcome,
            self.reason,
            self.recovery_count,
            self.cancellation_id,
            self.token,
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
        self.jobs: dict[str, ModelJob] = {}
        self.seq = 0
        self.readers = {name: Reader() for name in PARTITIONS}
        self.checkers = {name: Reader() for name in PARTITIONS}

    # -- the model's derived views ---------------------------------------------------------

    def running(self, queue: str) -> ModelJob | None:
        return next(
            (j for j in self.jobs.values() if j.queue == queue and j.state == "running"), None
        )

    def best_queued(self, queue: str) -> ModelJob | None:
        queued = [j for j in self.jobs.values() if j.queue == queue and j.state == "queued"]
        return min(queued, key=lambda j: j.rank, default=None)

    def head(self, queue: str) -> tuple[str, str | None, bool]:
        job = self.running(queue) or self.best_queued(queue)
        if job is None:
            return ("idle", None, False)
        return (job.state, job.job_id, job.cancellation_id is not None)

    def ready(self) -> list[ModelJob]:
        heads = {q: self.best_queued(q) for q in {j.queue for j in self.jobs.values()}}
        return [
            j
            for j in self.jobs.values()
            if j.state == "queued"
            and (
                j.cancellation_id is not None
                or (self.running(j.queue) is None and heads[j.queue] is j)
            )
        ]

    def feed_prefix(self, partition: Partition) -> list[ModelJob]:
        """Settled jobs of the partition in enqueue order, up to its first pending job."""
        prefix = []
        for job in sorted(self.jobs.values(), key=lambda j: j.seq):
            if not partition.holds(job.lane):
                continue
            if job.state != "settled":
                break
            prefix.append(job)
        return prefix

    def target(self, index: int, *, claimed: bool = False) -> str:
        """Mostly an existing job, sometimes a missing one. ``claimed``: half the time a
        running job, else any job that was ever claimed (so settled ones get replays)."""
        if index >= TARGETS - 1:
            return "ghost"
        jobs = sorted(self.jobs.values(), key=lambda j: j.seq)
        if claimed:
            running = [j for j in jobs if j.state == "running"]
            jobs = running if running and index < TARGETS // 2 else [j for j in jobs if j.tokens]
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
            self.enqueue(**job)

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
        kwargs = {
            "queue": queue,
            "lane": lane,
            "priority": priority,
            "payload": payload,
            "max_recoveries": budget,
        }
        prior = self.jobs.get(job_id)
        if prior is None:
            result = wd.enqueue(job_id, **kwargs)
            assert result.status == "queued"
            self.seq += 1
            self.jobs[job_id] = ModelJob(pk=result.job.pk, seq=self.seq, job_id=job_id, **kwargs)
            return
        differing = tuple(
            name
            for name, same in (
                ("queue", prior.queue == queue),
                ("lane", prior.lane == lane),
                ("priority", prior.priority == priority),
                ("payload", canonical(prior.payload) == canonical(payload)),
                ("max_recoveries", prior.max_recoveries == budget),
            )
            if not same
        )
        if differing:
            with pytest.raises(JobConflict) as caught:
                wd.enqueue(job_id, **kwargs)
            assert caught.value.fields == differing
        else:
            assert wd.enqueue(job_id, **kwargs).status == "duplicate"

    @precondition(lambda self: len(self.jobs) < len(JOB_IDS))
    @rule(job=NEW_JOB)
    def enqueue_fresh(self, job: dict[str, Any]) -> None:
        """A job id not in use (the other enqueue rule mostly hits existing ids)."""
        job["job_id"] = next(j for j in JOB_IDS if j not in self.jobs)
        self.enqueue(**job)

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
        else:
            expected = "recorded"
            job.cancellation_id = effective
        assert result.status == expected

    @precondition(lambda self: any(j.state == "queued" for j in self.jobs.values()))
    @rule(partition=st.sampled_from(sorted(PARTITIONS)))
    def claim(self, partition: str) -> None:
        part = PARTITIONS[partition]
        ready = [j for j in self.ready() if part.holds(j.lane)]
        result = Job.objects.claim(**part.claim)
        if not ready:
            assert result.status == "none"
            return
        best = min(ready, key=lambda j: j.rank)
        assert result.job is not None and result.job.job_id == best.job_id
        if best.cancellation_id is not None:
            assert result.status == "cancelled"
            best.state, best.outcome = "settled", "cancelled"
        else:
            assert result.status == "claimed" and result.claim_token
            best.state, best.token = "running", result.claim_token
            best.tokens.append(result.claim_token)

    @precondition(lambda self: any(j.tokens for j in self.jobs.values()))
    @rule(
        which=st.integers(0, TARGETS - 1),
        pick=st.integers(min_value=0, max_value=3),
        decision=st.sampled_from(sorted(DECISIONS)),
    )
    def settle(self, which: int, pick: int, decision: str) -> None:
        job_id = self.target(which, claimed=True)
        job = self.jobs.get(job_id)
        token = self.pick_token(job, pick)
        result = Job.objects.settle(job_id, token, DECISIONS[decision])
        if job is None:
            assert result.status == "missing"
            return
        effective = "cancelled" if job.cancellation_id is not None else decision
        if job.state == "settled":
            same = token == job.token and job.outcome == effective
            assert result.status == ("replayed" if same else "conflict")
        elif job.state != "running" or token != job.token:
            assert result.status == "conflict"
        else:
            assert result.status == "settled"
            job.state, job.outcome = "settled", effective
            job.reason = "E: boom" if effective == "failed" else None

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
        result = Job.objects.reconcile(job_id, token)
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
        results = Job.objects.recover(now=timezone.now() + timedelta(hours=1), timeout=30)
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
                "cancellation_id",
                "claim_token",
            )
        }
        assert stored == {j.job_id: list(j.observed()) for j in self.jobs.values()}

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
