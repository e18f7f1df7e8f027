"""The claim query uses its partial index (STYLE: a refactor must not silently make it scan).

The table is realistic: ~5,000 jobs, most settled, a few hundred queued behind 50 ready queue
heads, statistics gathered with ANALYZE; the planner chooses freely (no enable_seqscan off).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

import django_watchdog
from django_watchdog.domain.values import ClaimResult, Decision
from django_watchdog.models import Job, Queue
from django_watchdog.store import claims, feed
from django_watchdog.store.dialects import dialect, postgres
from django_watchdog.store.statistics import Analyzed
from django_watchdog.store.store import Store

pytestmark = pytest.mark.django_db

QUEUES = 50
SETTLED = 4_600
QUEUED_PER_QUEUE = 8


@pytest.fixture
def realistic_table() -> None:
    now = timezone.now()
    Queue.objects.bulk_create([Queue(name=f"q{index}") for index in range(QUEUES)])
    rows = [
        Job(
            job_id=f"done-{index}",
            queue=f"q{index % QUEUES}",
            lane=("mail", "sms", "push")[index % 3],
            priority=index % 5,
            state="settled",
            outcome="completed",
            feed_position=index + 1,
            position=index + 1,
            enqueued_at=now - timedelta(hours=1),
            started_at=now - timedelta(minutes=30),
            settled_at=now - timedelta(minutes=29),
        )
        for index in range(SETTLED)
    ]
    rows += [
        Job(
            job_id=f"wait-{queue}-{slot}",
            queue=f"q{queue}",
            lane=("mail", "sms", "push")[queue % 3],
            priority=queue % 7,
            state="queued",
            ready=slot == 0,  # each queue's head is ready
            position=SETTLED + 1 + slot * QUEUES + queue,
            enqueued_at=now,
        )
        for slot in range(QUEUED_PER_QUEUE)
        for queue in range(QUEUES)
    ]
    Job.objects.bulk_create(rows, batch_size=1_000)
    _analyze()
    assert Job.objects.count() == SETTLED + QUEUES * QUEUED_PER_QUEUE
    assert Job.objects.filter(ready=True).count() == QUEUES


def _analyze() -> None:
    """Gather the planner's statistics. Not on MariaDB, where ``ANALYZE TABLE`` commits the
    test's transaction; InnoDB estimates ranges by diving into the index anyway."""
    if connection.vendor == "mysql":
        return
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def _mariadb_plan(sql: str, params: dict[str, object]) -> str:
    """MariaDB's EXPLAIN rows, one line each: ``table type key rows Extra``."""
    rows = dialect("default").fetch("EXPLAIN " + sql, params)
    return "\n".join(f"{row[2]} {row[3]} {row[5]} {row[8]} {row[9]}" for row in rows)


def _plan(lanes: tuple[str, ...], exclude_lanes: tuple[str, ...]) -> str:
    """The plan of exactly the statement a claim runs (``claims.claim_statement``)."""
    partition = claims.Partition(lanes=lanes, exclude_lanes=exclude_lanes)
    sql, params = claims.claim_statement("default", partition, token="t", worker_id="w")
    if connection.vendor == "postgresql":
        rows = dialect("default").fetch("EXPLAIN " + sql, params)
        return "\n".join(str(row[0]) for row in rows)
    if connection.vendor == "mysql":  # the claim's first statement: the candidates' read
        return _mariadb_plan(sql, params)
    rows = dialect("default").fetch("EXPLAIN QUERY PLAN " + sql, params)
    return "\n".join(str(row[-1]) for row in rows)


@pytest.mark.usefixtures("realistic_table")
def test_claim_over_all_lanes_uses_the_claim_index() -> None:
    plan = _plan((), ())
    claim = _without_the_probe(plan)
    assert "watchdog_job_claim" in claim, plan
    assert "watchdog_job_claim_lane" not in claim, plan
    _assert_no_scan_of_the_job_table(plan)


def _without_the_probe(plan: str) -> str:
    """The plan less PostgreSQL's probe for claimable jobs the claim passed over (an
    ``InitPlan``, run only when it took none): that probe may read either claim index."""
    if connection.vendor != "postgresql":
        return plan
    claim, probe = plan.split("InitPlan", 1)
    assert "watchdog_job_claim" in probe, plan
    return claim


@pytest.mark.usefixtures("realistic_table")
def test_claim_excluding_lanes_uses_the_claim_index() -> None:
    plan = _plan((), ("push",))
    assert "watchdog_job_claim" in plan, plan
    _assert_no_scan_of_the_job_table(plan)


@pytest.mark.parametrize("lanes", [("mail",), ("mail", "sms")])
@pytest.mark.usefixtures("realistic_table")
def test_claim_of_some_lanes_uses_a_claim_index(lanes: tuple[str, ...]) -> None:
    # Either the lane-leading claim index or the claim index filtered by lane is fine:
    # both read only ready rows.
    plan = _plan(lanes, ())
    assert "watchdog_job_claim" in plan, plan
    _assert_no_scan_of_the_job_table(plan)


def _assert_no_scan_of_the_job_table(plan: str) -> None:
    if connection.vendor == "postgresql":
        assert "Seq Scan on watchdog_job" not in plan, plan
    elif connection.vendor == "mysql":
        # The read walks a claim index (ready rows only); the running-job probe of each
        # candidate's queue is an index lookup. No line reads a whole table ("ALL").
        tables = [line.split() for line in plan.splitlines()]
        assert all(words[1] != "ALL" for words in tables), plan
        assert tables[0][0] == "j" and tables[0][2].startswith("watchdog_job_claim"), plan
    else:
        # "SCAN j USING INDEX ..." walks the partial index (ready rows only): fine.
        # A bare "SCAN j" (or one using another index) would visit every job.
        # The claimed rows are then updated by rowid ("taken" is the updated table).
        for line in plan.splitlines():
            if line.startswith("SCAN j") or line.startswith("SEARCH j"):
                assert "watchdog_job_claim" in line, plan
            if line.startswith(("SCAN taken", "SEARCH taken")):
                assert "INTEGER PRIMARY KEY" in line, plan
        assert any(line.startswith("SEARCH taken") for line in plan.splitlines()), plan


@pytest.mark.usefixtures("realistic_table")
def test_the_realistic_table_claims_the_best_head() -> None:
    # Sanity: the table the plans were read from is one the store can work with.
    result = Store().claim()
    assert result.status == "claimed"
    assert result.job is not None and result.job.priority == 6
    assert result.job.job_id == "wait-6-0"


def _feed_plan(lanes: tuple[str, ...], exclude_lanes: tuple[str, ...]) -> str:
    """The plan of exactly the statement a feed read runs (``feed.settled_jobs_statement``)."""
    sql, params = feed.settled_jobs_statement("default", 100, 256, lanes, exclude_lanes)
    if connection.vendor == "mysql":
        return _mariadb_plan(sql, params)
    explain = "EXPLAIN " if connection.vendor == "postgresql" else "EXPLAIN QUERY PLAN "
    rows = dialect("default").fetch(explain + sql, params)
    return "\n".join(str(row[0] if connection.vendor == "postgresql" else row[-1]) for row in rows)


@pytest.mark.parametrize(("lanes", "exclude_lanes"), [((), ()), (("mail",), ()), ((), ("mail",))])
@pytest.mark.usefixtures("realistic_table")
def test_a_feed_read_uses_the_feed_indexes(
    lanes: tuple[str, ...], exclude_lanes: tuple[str, ...]
) -> None:
    """Both halves of a feed read, the settled jobs and the horizon, are index scans."""
    with transaction.atomic():
        feed.position_new_rows("default")  # the queued jobs get positions: a horizon
    _analyze()
    plan = _feed_plan(lanes, exclude_lanes)
    if connection.vendor == "postgresql":
        assert "Seq Scan" not in plan, plan
        used = re.findall(r"Scan (?:using|on) (watchdog_job_\w+)", plan)
    elif connection.vendor == "mysql":
        tables = [line.split() for line in plan.splitlines()]
        assert len(tables) == 2, plan  # nothing but the read and its horizon
        assert all(words[1] != "ALL" for words in tables), plan
        used = [words[2] for words in tables]
    else:
        reads = [line for line in plan.splitlines() if line.startswith(("SCAN", "SEARCH"))]
        assert len(reads) == 2, plan  # nothing but the read and its horizon
        used = [m for line in reads for m in re.findall(r"INDEX (watchdog_job_\w+)", line)]
        assert len(used) == 2, plan
    read, horizon = (
        ("feed_lane_at", "feed_lane_pend_at") if lanes else ("feed_at", "feed_pending_at")
    )
    assert sorted(used) == sorted([f"watchdog_job_{read}", f"watchdog_job_{horizon}"]), plan


@pytest.mark.mariadb_only
@pytest.mark.parametrize("lanes", [(), ("mail",)])
@pytest.mark.usefixtures("realistic_table")
def test_the_idle_workers_probe_reads_index_ends_only(lanes: tuple[str, ...]) -> None:
    """MariaDB's probe, run every 0.1 s by an idle worker: the best ready job is a walk of a
    claim index, the next delayed job's due time an end of the due index (the aggregate
    is "optimized away"), the next retry's a range of the retry index (retrying jobs only).
    No read of the job table is a scan."""
    Job.objects.filter(job_id="wait-0-7").update(
        delayed=True, run_after=timezone.now() + timedelta(hours=1), position=None
    )
    sql, params = claims.probe_statement("default", claims.Partition(lanes=lanes))
    plan = _mariadb_plan(sql, params)
    reads = [line.split() for line in plan.splitlines()]
    job_reads = [words for words in reads if words[0] in ("j", "r", "watchdog_job")]
    assert all(words[1] != "ALL" for words in job_reads), plan
    keys = {(words[0], words[2]) for words in job_reads}
    assert any(table == "j" and key.startswith("watchdog_job_claim") for table, key in keys), plan
    assert ("watchdog_job", "watchdog_job_retry_due") in keys, plan
    assert "Select tables optimized away" in plan, plan


@pytest.mark.postgres_only
def test_a_claim_takes_its_picked_jobs_by_address_whatever_the_statistics_say() -> None:
    # A queue's table changes faster than its statistics: analyzed when every job had
    # settled, they say no job is queued, so the planner once walked every queued job
    # (the lane_pending index) to find the one the claim had picked, a cost growing with
    # the backlog. The picked row is taken by its address (a TID scan) instead.
    _analyzed_when_every_job_had_settled(QUEUES)
    _queue_a_backlog(QUEUES * QUEUED_PER_QUEUE, QUEUES, after=SETTLED)
    for lanes in ((), ("mail",)):
        claim = _without_the_probe(_plan(lanes, ()))
        read = [line for line in claim.splitlines() if "Scan on watchdog_job taken" in line]
        assert len(read) == 1 and "Tid Scan" in read[0], claim


@pytest.mark.postgres_only
@pytest.mark.parametrize("lanes", [("mail",), ("mail", "sms"), ("mail", "push", "sms")])
def test_a_claim_reuses_its_plan_with_fresh_statistics(lanes: tuple[str, ...]) -> None:
    # A backlog of 3,000 queued jobs over 200 queues, its statistics fresh (autovacuum keeps
    # them so on a production server): PostgreSQL planned the claim afresh on every run,
    # since the generic plan it weighs against the first five runs' plans could not know
    # the claim's LIMIT: 1.7 ms more per job of the default worker. The limit is part of
    # the statement now, and its one plan is reused. So over several lanes (the default
    # worker serves every lane with a handler), each walked on its own: their values come
    # as a list whose length the one plan knows (from a bound array, PostgreSQL planned
    # the claim afresh on every run).
    queues = 200
    Queue.objects.bulk_create([Queue(name=f"q{index}") for index in range(queues)])
    _queue_a_backlog(15 * queues, queues, after=0)
    _analyze()
    _claims_reusing_one_plan(claims.Partition(lanes=lanes))


@pytest.mark.postgres_only
@pytest.mark.parametrize("lanes", [("mail",), ("mail", "sms"), ("mail", "push", "sms")])
def test_a_claim_over_lanes_reuses_one_plan_that_walks_a_few_jobs_after_the_table_grew(
    lanes: tuple[str, ...],
) -> None:
    # A table never analyzed (a new install's), then a backlog over 200 queues. Over
    # several lanes, as the default worker claims (every lane with a handler), the claim's
    # one plan read every ready job of the lanes, joined each to its queue and sorted
    # them, where over one lane it walks the lane's claim index: 0.6 to 1.1 ms more of the
    # server's per job of the default worker, and growing with the ready jobs. Each lane is
    # walked on its own now, its value from a list whose length the plan knows (a bound
    # array made PostgreSQL plan the claim afresh on every run instead).
    _never_analyzed()
    queues = 200
    Queue.objects.bulk_create([Queue(name=f"q{index}") for index in range(queues)])
    _queue_a_backlog(5 * queues, queues, after=0)
    read = _claims_reusing_one_plan(claims.Partition(lanes=lanes))
    assert max(read[5:]) < queues / 10, read


def _claims_reusing_one_plan(partition: claims.Partition) -> list[int]:
    """Eight claims of ``partition``, each taking a job, the last ones by the one plan
    PostgreSQL keeps for the statement: the index entries each read."""
    read = []
    for n in range(8):
        entries = _job_index_entries_read()
        result = Store().claim(partition, worker_id="w", token=f"t{n}")
        read.append(_job_index_entries_read() - entries)
        assert result.status == "claimed"
    rows = dialect("default").fetch(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
        " WHERE statement LIKE %(claim)s",
        {"claim": "%WITH candidate AS%"},
    )
    assert rows, "the claim ran as a prepared statement"
    generic, custom = rows[0]
    assert generic >= 3 and custom <= 5, rows
    return read


def _never_analyzed() -> None:
    """Empty job and queue tables with no statistics at all, as a new install's."""
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE watchdog_job, watchdog_queue")  # a new file, as a new install's
        cursor.execute(  # and no statistics at all
            "DELETE FROM pg_statistic"
            " WHERE starelid IN ('watchdog_job'::regclass, 'watchdog_queue'::regclass)"
        )


def _analyzed_when_every_job_had_settled(
    queues: int, prefix: str = "q", *, analyze: bool = True
) -> None:
    """``queues`` queues (``q0``…) with a settled history of lane ``mail``, analyzed (unless
    not ``analyze``)."""
    now = timezone.now()
    Queue.objects.bulk_create([Queue(name=f"{prefix}{index}") for index in range(queues)])
    settled = dict(state="settled", outcome="completed", enqueued_at=now, settled_at=now)
    Job.objects.bulk_create(
        [
            Job(
                job_id=f"done-{n}",
                queue=f"{prefix}{n % queues}",
                lane="mail",
                position=n,
                **settled,
            )
            for n in range(1, SETTLED)
        ],
        batch_size=1_000,
    )
    if analyze:
        _analyze()


def _queue_a_backlog(count: int, queues: int, *, after: int, prefix: str = "q") -> None:
    """``count`` queued jobs of lane ``mail`` over ``queues`` queues (``q0``…), positioned
    after ``after``; the first of each queue ready."""
    now = timezone.now()
    Job.objects.bulk_create(
        [
            Job(
                job_id=f"wait-{n}",
                queue=f"{prefix}{n % queues}",
                lane="mail",
                state="queued",
                ready=n < queues,
                position=after + n + 1,
                enqueued_at=now,
            )
            for n in range(count)
        ],
        batch_size=1_000,
    )


def _job_index_entries_read() -> int:
    """Entries of the job table's partial indexes this transaction has read so far: those
    stale statistics call empty (PostgreSQL). The primary key's are left out: planning a
    join on ids probes its ends, reading past the rows rolled-back tests left there."""
    ((read,),) = dialect("default").fetch(
        "SELECT COALESCE(SUM(pg_stat_get_xact_tuples_returned(indexrelid)), 0)"
        " FROM pg_index WHERE indrelid = 'watchdog_job'::regclass AND indpred IS NOT NULL"
    )
    return int(read)


@pytest.mark.postgres_only
@pytest.mark.parametrize("lanes", [("mail",), ("mail", "sms")])
def test_a_claim_walks_a_claim_index_whatever_the_statistics_say(lanes: tuple[str, ...]) -> None:
    # Statistics gathered when every job had settled (an idle server, when autovacuum
    # looked) call every index of ready jobs empty. The planner then read every ready job
    # through the index of a queue's ready jobs, joined each to its queue and sorted them,
    # in every claim: with 400 queues behind, two default workers drained at 0.4x their
    # rate, the server reading 1,330 blocks a claim. Without that index, it merged them
    # with the queue table instead (sorted by queue, then sorted again).
    queues = 1_000
    _analyzed_when_every_job_had_settled(queues, prefix="idle-", analyze=False)
    # Every settled job was ready once, as on a server, where the index of a queue's ready
    # jobs holds a queue's many entries in one (deduplicated) and the claim indexes, wider,
    # one each: more pages, and in the planner's estimate more cost. Here the history is
    # one queue's; its entries, dead but not to this transaction, sort after the backlog's.
    history = Job.objects.filter(job_id__startswith="done-")
    moved = {"position": F("position") + 10**7, "queue": "idle-0"}
    history.update(state="queued", outcome=None, ready=True, **moved)
    history.update(state="settled", outcome="completed", ready=False)
    _analyze()
    _queue_a_backlog(queues * 2, queues, after=SETTLED, prefix="idle-")
    store = Store()
    partition = claims.Partition(lanes=lanes)
    # The first walk of a claim index also passes the entries tests rolled back left there.
    assert store.claim(partition, worker_id="w", token="first").status == "claimed"
    for n in range(3):
        read = _job_index_entries_read()
        claimed = store.claim(partition, worker_id="w", token=f"t{n}")
        assert claimed.status == "claimed"
        assert _job_index_entries_read() - read < queues / 10


@pytest.mark.postgres_only
def test_a_settle_and_an_enqueue_read_a_few_jobs_whatever_the_statistics_say() -> None:
    # Statistics gathered when every job had settled (an idle queue on a production server;
    # a burst of jobs changes far fewer rows than the fraction of a long history that makes
    # autovacuum look again) say no job is queued or ready, and the partial indexes of
    # pending jobs empty. The planner then walked every queued job (the lane_pending index)
    # to find a queue's next head, in every settle and every enqueue into a queue with
    # jobs: a drain of 10,000 jobs went from 3,200 to 560 jobs/s, and every ready job (a
    # claim index) for the head an enqueue displaces.
    queues, per_queue = 1_000, 4
    _analyzed_when_every_job_had_settled(queues, prefix="stale-")
    _queue_a_backlog(queues * per_queue, queues, after=SETTLED, prefix="stale-")
    store = Store()
    claimed = store.claim(claims.Partition(lanes=("mail",)), worker_id="w", token="t")
    assert claimed.status == "claimed" and claimed.job is not None
    read = _job_index_entries_read()
    settled_one, _ = store.settle(claimed.job.job_id, claimed.job.claim_token, Decision.completed())
    assert settled_one.status == "settled"
    assert _job_index_entries_read() - read < queues / 10
    read = _job_index_entries_read()
    django_watchdog.enqueue("displacing", queue="stale-1", lane="mail", priority=9)
    assert _job_index_entries_read() - read < queues / 10
    assert not Job.objects.get(job_id="wait-1").ready
    _a_due_job_into("stale-2", priority=9)
    read = _job_index_entries_read()
    assert store.promote_due(now=timezone.now()) == 1
    assert _job_index_entries_read() - read < queues / 10
    assert not Job.objects.get(job_id="wait-2").ready and Job.objects.get(job_id="due").ready


def _a_due_job_into(queue: str, *, priority: int, job_id: str = "due") -> None:
    """A delayed job of ``queue`` whose time has come (the next ``promote_due`` enters it)."""
    now = timezone.now()
    Job.objects.create(
        job_id=job_id,
        queue=queue,
        lane="mail",
        priority=priority,
        state="queued",
        delayed=True,
        run_after=now - timedelta(seconds=1),
        enqueued_at=now,
    )


def _rows_scanned() -> int:
    """Rows of the job table this transaction has read by scanning it whole (PostgreSQL)."""
    ((read,),) = dialect("default").fetch(
        "SELECT pg_stat_get_xact_tuples_returned('watchdog_job'::regclass)"
    )
    return int(read)


@pytest.mark.postgres_only
def test_an_enqueue_and_a_due_job_demote_by_probes_in_a_plan_made_on_a_small_table() -> None:
    # A prepared statement's generic plan, made while the table was small, is kept as it
    # grows. A plan that joined the displaced head's id to the job table scanned the whole
    # table on every enqueue into a new queue; one that asked for the queue's ready job
    # walked a claim index. The table is emptied here (a new file: small, never analyzed,
    # as a new install's is) and every plan is generic.
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE watchdog_job, watchdog_queue")
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    for n in range(3):  # the statements are planned while the table holds a few jobs
        django_watchdog.enqueue(f"small-{n}", queue="small", lane="mail", priority=n)
        _a_due_job_into("small", priority=9, job_id=f"small-due-{n}")
        Store().promote_due(now=timezone.now())
    queues = 1_000
    _analyzed_when_every_job_had_settled(queues, prefix="big-", analyze=False)
    _queue_a_backlog(queues * 4, queues, after=SETTLED, prefix="big-")
    Queue.objects.create(name="empty")
    store = Store()
    for enqueue in (
        lambda: django_watchdog.enqueue("into-empty", queue="empty", lane="mail"),
        lambda: django_watchdog.enqueue("displacing", queue="big-1", lane="mail", priority=9),
    ):
        read, scanned = _job_index_entries_read(), _rows_scanned()
        enqueue()
        assert _rows_scanned() - scanned == 0
        assert _job_index_entries_read() - read < queues / 10
    assert not Job.objects.get(job_id="wait-1").ready
    _a_due_job_into("big-2", priority=9)
    read, scanned = _job_index_entries_read(), _rows_scanned()
    assert store.promote_due(now=timezone.now()) == 1
    assert _rows_scanned() - scanned == 0
    assert _job_index_entries_read() - read < queues / 10
    assert not Job.objects.get(job_id="wait-2").ready and Job.objects.get(job_id="due").ready


@pytest.mark.postgres_only
def test_a_settle_and_a_retry_find_their_job_by_its_id_whatever_the_statistics_say() -> None:
    # Statistics gathered when no job ran call the running jobs' indexes empty: the settle's
    # and the retry's fenced update walked every running job in one of them (1,000 here)
    # rather than probe the job's id, and so did the settle's check for a running job of
    # the queue before it readies the next head.
    queues = 1_000
    _analyzed_when_every_job_had_settled(queues, prefix="busy-")
    _queue_a_backlog(queues, queues, after=SETTLED, prefix="busy-")  # a job in each queue
    running = Job.objects.filter(job_id__startswith="wait-")
    running.update(state="running", ready=False, claim_token=F("job_id"), claimed_by="w")
    now = timezone.now()
    d = dialect("default")
    later = d.param_datetime(now + timedelta(hours=1))
    fenced = {"reason": None, "result": None, "traceback": None, "retry_at": later}
    for n, statement in ((1, d.SETTLE), (2, d.RETRY)):
        read = _job_index_entries_read()
        job = {"job_id": f"wait-{n}", "claim_token": f"wait-{n}"}
        changed = d.fetch(statement, {**fenced, **job, "outcome": "completed"})
        assert len(changed) == 1
        assert _job_index_entries_read() - read < queues / 10
    read = _job_index_entries_read()
    settled, _ = Store().settle("wait-3", "wait-3", Decision.completed())
    assert settled.status == "settled"
    assert _job_index_entries_read() - read < queues / 10


def _a_small_analyzed_table() -> None:
    """29 jobs over 5 queues (``small-0``…), 5 of them ready, analyzed: on a page, every
    lookup is cheaper as a scan than through an index, in the planner's estimate."""
    now = timezone.now()
    Queue.objects.bulk_create([Queue(name=f"small-{index}") for index in range(5)])
    settled = dict(state="settled", outcome="completed", enqueued_at=now, settled_at=now)
    Job.objects.bulk_create(
        [
            Job(
                job_id=f"small-done-{n}", queue=f"small-{n % 5}", lane="mail", position=n, **settled
            )
            for n in range(1, 20)
        ]
        + [
            Job(
                job_id=f"small-wait-{n}",
                queue=f"small-{n % 5}",
                lane="mail",
                state="queued",
                ready=n < 5,
                position=100 + n,
                enqueued_at=now,
            )
            for n in range(10)
        ]
    )
    _analyze()


def _hot_statements(prefix: str) -> dict[str, tuple[int, int]]:
    """Run each hot statement once on queues ``{prefix}-1``… (which hold queued jobs):
    per step, the job rows it read by scanning the table and the index entries it read."""
    store = Store()
    partition = claims.Partition(lanes=("mail",))
    read: dict[str, tuple[int, int]] = {}

    def count(step: str, run: Callable[[], object]) -> object:
        scanned, entries = _rows_scanned(), _job_index_entries_read()
        done = run()
        read[step] = (_rows_scanned() - scanned, _job_index_entries_read() - entries)
        return done

    enqueue = django_watchdog.enqueue
    count(
        "enqueue displacing a head",
        lambda: enqueue(f"{prefix}-a", queue=f"{prefix}-1", lane="mail", priority=9),
    )
    count("enqueue behind a head", lambda: enqueue(f"{prefix}-b", queue=f"{prefix}-2", lane="mail"))
    many = [{"job_id": f"{prefix}-m{n}", "queue": f"{prefix}-{n}", "lane": "mail"} for n in (3, 4)]
    count("enqueue_many", lambda: django_watchdog.enqueue_many(many))
    claimed = count("claim", lambda: store.claim(partition, worker_id="w", token=f"{prefix}-t"))
    assert isinstance(claimed, ClaimResult) and claimed.job is not None
    job = claimed.job
    count(
        "settle and the next head",
        lambda: store.settle(job.job_id, job.claim_token, Decision.completed()),
    )
    claimed = store.claim(partition, worker_id="w", token=f"{prefix}-u")
    assert claimed.job is not None
    job, later = claimed.job, timezone.now() + timedelta(hours=1)
    failed = dataclasses.replace(Decision.failed("again"), retry_at=later)
    count("retry", lambda: store.settle(job.job_id, job.claim_token, failed))
    _a_due_job_into(f"{prefix}-0", priority=9, job_id=f"{prefix}-due")
    count("promote_due", lambda: store.promote_due(now=timezone.now()))
    count("next_due", store.next_due)
    count("retries_pending", lambda: store.retries_pending(partition))
    count("ready_probe", lambda: store.ready_probe(partition))
    count(
        "claim of 32",
        lambda: store.settle_and_claim(
            [], claim_next=partition, limit=32, worker_id="w", token=f"{prefix}-b"
        ),
    )
    return read


def _plans_made_long_ago() -> None:
    """As if ``REPLAN_SECONDS`` had passed since this connection's plans were made."""
    kept = getattr(connection, "_watchdog_cursors", None)
    if kept is not None:
        kept.planned_at -= postgres.REPLAN_SECONDS


@pytest.mark.postgres_only
def test_plans_made_on_a_small_analyzed_table_are_made_again_as_it_grows() -> None:
    # The table holds a few jobs and was analyzed (a new install, after autovacuum's first
    # look): in the plans made then, a scan of its one page is cheaper than any index, so
    # every lookup of every hot statement scans. PostgreSQL keeps a prepared statement's
    # generic plan (forced here; chosen on its own after five runs) until a change to the
    # table's statistics invalidates it: the table grows, autovacuum has not looked again,
    # and every enqueue, claim and settle read the whole table, as many times as it has
    # lookups. The plans are made afresh every REPLAN_SECONDS.
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE watchdog_job, watchdog_queue")
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    _a_small_analyzed_table()
    on_the_small_table = _hot_statements("small")
    assert all(scanned > 0 for scanned, _ in on_the_small_table.values()), on_the_small_table
    queues = 1_000
    _analyzed_when_every_job_had_settled(queues, prefix="big-", analyze=False)
    _queue_a_backlog(queues * 4, queues, after=SETTLED, prefix="big-")
    _plans_made_long_ago()
    grown = _hot_statements("big")
    assert {step: scanned for step, (scanned, _) in grown.items()} == dict.fromkeys(grown, 0)
    # A claim of 32 reads every ready job (expecting fewer claimable jobs than it takes,
    # the planner sees no gain in walking the claim index in order): stale statistics,
    # not the plan's age. A claim of one walks it (it once started from the queue table,
    # which the statistics call small, and probed each queue's ready job).
    bounded = {step: entries for step, (_, entries) in grown.items() if step != "claim of 32"}
    assert max(bounded.values()) < queues / 10, grown


@pytest.mark.postgres_only
@pytest.mark.xfail(
    strict=True,
    reason="not fixed: estimating fewer claimable jobs than it takes, the claim joins every "
    "ready job to the queue table and sorts them rather than walk the claim index",
)
def test_a_claim_of_32_over_every_lane_walks_the_claim_index_on_a_table_never_analyzed() -> None:
    _never_analyzed()
    queues = 500
    Queue.objects.bulk_create([Queue(name=f"q{index}") for index in range(queues)])
    _queue_a_backlog(queues * 2, queues, after=0)  # 500 ready jobs, one per queue
    entries, scanned = _job_index_entries_read(), _rows_scanned()
    _, claimed = Store().settle_and_claim([], claim_next=claims.Partition(), limit=32)
    read = (_job_index_entries_read() - entries, _rows_scanned() - scanned)
    assert len(claimed) == 32
    assert sum(read) < queues / 5, read


def _pairs_compared(sql: str, params: dict[str, Any]) -> int:
    """Rows the joins of ``sql``'s plan compared and rejected (``EXPLAIN ANALYZE``): a join
    that compares every job with every queue rejects about their product."""
    ((plan,),) = dialect("default").fetch("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
    if isinstance(plan, str):
        plan = json.loads(plan)

    def rejected(node: dict[str, Any]) -> int:
        own = int(node.get("Rows Removed by Join Filter", 0)) * int(node.get("Actual Loops", 1))
        return own + sum(rejected(child) for child in node.get("Plans", ()))

    return rejected(plan[0]["Plan"])


@pytest.mark.postgres_only
@pytest.mark.parametrize("lanes", [(), ("mail",)])
def test_a_claim_of_32_joins_its_jobs_to_their_queues_in_one_pass_on_any_statistics(
    lanes: tuple[str, ...],
) -> None:
    # Where the planner reads every ready job anyway (the expected failure above, and a
    # table analyzed while small), it joins them to their queues in one pass (a hash join):
    # a join condition no hash join takes made it compare every job with every queue
    # (250,000 pairs here, 58 ms; 1,000,000 and 232 ms with 1,000 queues). On a table never
    # analyzed the update of the taken jobs compares each with every ready job (16,000
    # pairs): the bound is what the claim takes times what it may read.
    partition = claims.Partition(lanes=lanes)
    for table in ("never analyzed", "analyzed while small"):
        with transaction.atomic():
            if table == "never analyzed":
                _never_analyzed()
            else:
                with connection.cursor() as cursor:
                    cursor.execute("TRUNCATE watchdog_job, watchdog_queue")
                _a_small_analyzed_table()
            queues = 500
            Queue.objects.bulk_create([Queue(name=f"q{index}") for index in range(queues)])
            _queue_a_backlog(queues * 2, queues, after=100)
            sql, params = claims.claim_statement("default", partition, token="t", limit=32)
            assert _pairs_compared(sql, params) < 32 * queues * 2, table
            transaction.set_rollback(True)


def _queue_rows_scanned() -> int:
    """Rows of the queue table this transaction has read by scanning it whole (PostgreSQL)."""
    ((read,),) = dialect("default").fetch(
        "SELECT pg_stat_get_xact_tuples_returned('watchdog_queue'::regclass)"
    )
    return int(read)


def _grown_never_analyzed(history: int = 60_000) -> int:
    """Job and queue tables never analyzed, grown: 2,000 queues (the backlog's 400 created
    last, so a scan of the table meets them last), ``history`` settled jobs, 800 queued
    (one ready per queue of the backlog). Generic plans, as a worker's are after five runs.
    The number of queues."""
    _never_analyzed()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    queues = 2_000
    idle = [Queue(name=f"idle-{index}") for index in range(queues - 400)]
    Queue.objects.bulk_create(idle + [Queue(name=f"q{index}") for index in range(400)])
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO watchdog_job (job_id, queue, lane, priority, state, outcome, position,"
            " feed_position, attempts, recovery_count, ready, delayed, enqueued_at, settled_at)"
            " SELECT 'done-' || n, 'q' || (n %% 400), 'mail', 0, 'settled', 'completed', n, n,"
            " 1, 0, FALSE, FALSE, now(), now() FROM generate_series(1, %s) AS n",
            [history],
        )
    _queue_a_backlog(800, 400, after=history)
    return queues


@pytest.mark.postgres_only
@pytest.mark.parametrize("lanes", [(), ("mail",), ("mail", "sms")])
def test_a_claim_of_one_probes_its_queues_once_tables_never_analyzed_are(
    lanes: tuple[str, ...],
) -> None:
    # Tables never analyzed (a new install's until autovacuum looks; every install's where
    # it is off): the planner guesses the queue table at a tenth of its rows, from their
    # declared widths. A default worker's claim then read the queue table whole and
    # compared each job it walked with every queue (here 1,601 queue rows read a claim,
    # over every lane and over one), or read every ready job, compared each with every
    # queue and sorted them (seen in a worker's plan: 50 ms a claim, its drain 60 times
    # slower). No form of the statement held on every kind of statistics; the worker's
    # housekeeping analyzes such tables.
    queues = _grown_never_analyzed()
    store = Store()
    assert store.analyze_unanalyzed().analyzed == ("watchdog_job", "watchdog_queue")
    _plans_made_long_ago()
    partition = claims.Partition(lanes=lanes)
    for n in range(3):
        entries, scanned = _job_index_entries_read(), _queue_rows_scanned()
        assert store.claim(partition, worker_id="w", token=f"t{n}").status == "claimed"
        read = (_job_index_entries_read() - entries, _queue_rows_scanned() - scanned)
        assert sum(read) < queues / 10, read


@pytest.mark.postgres_only
def test_tables_without_statistics_are_analyzed_once_they_hold_ten_pages() -> None:
    _never_analyzed()
    with connection.cursor() as cursor:  # analyzed empty: still no density to scale by
        cursor.execute("ANALYZE watchdog_job, watchdog_queue")
    store = Store()
    Queue.objects.create(name="q0")
    _queue_a_backlog(10, 1, after=0)
    small = store.analyze_unanalyzed()
    assert (small.analyzed, small.waiting) == ((), ("watchdog_job", "watchdog_queue"))
    _grown_never_analyzed(history=2_000)
    assert store.analyze_unanalyzed().analyzed == ("watchdog_job", "watchdog_queue")
    assert store.analyze_unanalyzed() == Analyzed()  # both have statistics now
    ((without,),) = dialect("default").fetch(
        "SELECT count(*) FROM pg_class WHERE relpages = 0"
        " AND oid IN ('watchdog_job'::regclass, 'watchdog_queue'::regclass)"
    )
    assert without == 0


@pytest.mark.postgres_only
def test_a_role_that_may_not_analyze_the_tables_is_told_so() -> None:
    _grown_never_analyzed(history=2_000)
    with connection.cursor() as cursor:
        cursor.execute("CREATE ROLE watchdog_not_owner")
        cursor.execute("GRANT SELECT ON watchdog_job, watchdog_queue TO watchdog_not_owner")
        cursor.execute("SET LOCAL ROLE watchdog_not_owner")
    found = Store().analyze_unanalyzed(skip=("watchdog_queue",))
    assert (found.analyzed, found.refused) == ((), ("watchdog_job",))
