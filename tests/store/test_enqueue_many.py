"""enqueue_many(): one transaction for a batch, all or nothing, same rules as enqueue()."""

import copy
import dataclasses
import gc
import pickle
from datetime import timedelta

import pytest
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job, Queue
from django_watchdog.store.enqueue import NewJob
from django_watchdog.store.store import Store

pytestmark = pytest.mark.django_db


def test_a_batch_is_queued_in_order_with_one_head_per_queue():
    results = wd.enqueue_many(
        [
            {"job_id": "a1", "queue": "a"},
            {"job_id": "b1", "queue": "b", "priority": 1},
            {"job_id": "a2", "queue": "a", "priority": 5, "payload": {"n": 2}},
        ]
    )
    assert [(r.status, r.job.job_id) for r in results] == [
        ("queued", "a1"),
        ("queued", "b1"),
        ("queued", "a2"),
    ]
    assert wd.queue_head("a").job_id == "a2"
    assert set(Job.objects.filter(ready=True).values_list("job_id", flat=True)) == {"a2", "b1"}
    assert [r.job.ready for r in results] == [False, True, True]
    assert Store().claim().job.job_id == "a2"


def test_repeats_are_duplicates_inside_and_across_batches():
    wd.enqueue("x", queue="q", payload=1)
    results = wd.enqueue_many(
        [
            {"job_id": "x", "queue": "q", "payload": 1},
            {"job_id": "y", "queue": "q"},
            {"job_id": "y", "queue": "q"},
        ]
    )
    assert [r.status for r in results] == ["duplicate", "queued", "duplicate"]
    assert Job.objects.count() == 2


def test_ids_follow_the_batch_order_across_statements():
    """A batch longer than one statement takes (100 rows on SQLite and MariaDB) is numbered
    in batch order without gaps growing from statement to statement, a repeat in a later
    statement included."""
    jobs = [{"job_id": f"j{i}", "queue": f"q{i % 7}"} for i in range(250)]
    jobs.insert(180, {"job_id": "j5", "queue": "q5"})
    results = wd.enqueue_many(jobs)
    assert [r.status for r in results].count("duplicate") == 1
    ids = [r.job.pk for r in results if r.status == "queued"]
    stored = dict(Job.objects.values_list("job_id", "id"))
    assert ids == [stored[f"j{i}"] for i in range(250)]
    assert ids == sorted(ids)
    assert max(ids) - min(ids) < 2 * len(jobs)


def test_each_job_a_batch_returns_is_stamped_as_its_row():
    """Every returned job carries the ``enqueued_at`` its row holds, to the microsecond and
    aware, across the statements of a batch longer than one (MariaDB returns it as text,
    decoded once per statement)."""
    results = wd.enqueue_many([{"job_id": f"s{i}", "queue": f"q{i % 3}"} for i in range(250)])
    stored = dict(Job.objects.values_list("job_id", "enqueued_at"))
    assert {r.job.job_id: r.job.enqueued_at for r in results} == stored
    assert {r.job.enqueued_at.utcoffset() for r in results} == {timedelta(0)}


def test_a_conflict_rolls_the_whole_batch_back():
    wd.enqueue("x", queue="q", payload=1)
    with pytest.raises(wd.JobConflict) as raised:
        wd.enqueue_many(
            [{"job_id": "new", "queue": "fresh"}, {"job_id": "x", "queue": "q", "payload": 2}]
        )
    assert raised.value.fields == ("payload",)
    assert list(Job.objects.values_list("job_id", flat=True)) == ["x"]
    assert not Queue.objects.filter(name="fresh").exists()


@pytest.mark.parametrize(
    ("jobs", "field"),
    [
        (
            [{"job_id": "a", "queue": "q"}, {"job_id": "b", "queue": "q", "priority": True}],
            "jobs[1].priority",
        ),
        ([{"job_id": "a"}], "jobs[0]"),
        ([{"job_id": "a", "queue": "q", "colour": "red"}], "jobs[0]"),
        ([("a", "q")], "jobs[0]"),
        ({"job_id": "a", "queue": "q"}, "jobs"),
    ],
)
def test_bad_items_are_named_and_nothing_is_written(jobs, field):
    with pytest.raises(wd.InvalidInput) as raised:
        wd.enqueue_many(jobs)
    assert raised.value.field == field
    assert not Job.objects.exists()


def test_delayed_jobs_in_a_batch_block_nothing():
    later = timezone.now() + timedelta(hours=1)
    results = wd.enqueue_many(
        [{"job_id": "d", "queue": "q", "run_after": later}, {"job_id": "n", "queue": "q"}]
    )
    assert [r.job.delayed for r in results] == [True, False]
    assert wd.queue_head("q").job_id == "n"


def test_an_empty_batch_does_nothing():
    assert wd.enqueue_many([]) == []


def test_a_conflict_restores_the_head_a_new_job_had_displaced():
    wd.enqueue("x", queue="q", payload=1)
    with pytest.raises(wd.JobConflict):
        wd.enqueue_many(
            [
                {"job_id": "urgent", "queue": "q", "priority": 9},
                {"job_id": "x", "queue": "q", "payload": 2},
            ]
        )
    assert list(Job.objects.values_list("job_id", "ready")) == [("x", True)]
    assert Store().claim().job.job_id == "x", "the caller's transaction is still usable"


def test_a_repeat_that_would_have_been_the_head_leaves_the_head_ready():
    wd.enqueue("done", queue="q", priority=5)
    claim = Store().claim()
    Store().settle("done", claim.claim_token, Decision.completed())
    wd.enqueue("low", queue="q", priority=0)
    results = wd.enqueue_many([{"job_id": "done", "queue": "q", "priority": 5}])
    assert [r.status for r in results] == ["duplicate"]
    assert Job.objects.get(job_id="low").ready, "still the head: the repeat was not inserted"
    assert Store().claim().job.job_id == "low"


@pytest.mark.parametrize("count", [1, 3])
def test_the_trace_context_is_written_with_each_job_into_new_and_existing_queues(count):
    """Every insert statement of each dialect binds it: queues created by the call and
    queues that existed, one job and many."""
    from django_watchdog.store.enqueue import NewJob

    context = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}

    def batch(prefix):
        return [
            NewJob.parse(
                f"{prefix}{n}",
                queue=f"q{n}",
                lane="default",
                priority=0,
                payload=None,
                max_recoveries=None,
                trace_context=context,
            )
            for n in range(count)
        ]

    created = Store().enqueue_many(batch("new"))  # the call creates the queues
    existing = Store().enqueue_many(batch("more"))  # the queues exist now
    for result in created + existing:
        assert result.job.trace_context == context
    assert [job.trace_context for job in Job.objects.all()] == [context] * (2 * count)
    assert Store().claim().job.trace_context == context


def test_every_value_of_a_batch_is_stored_as_given_whatever_its_neighbours_hold():
    """Each column goes to the server as one array: values and NULLs side by side, the
    extremes of each type, text beyond ASCII."""
    later = timezone.now() + timedelta(hours=1)
    limit = 9007199254740991
    items = [
        {"job_id": "é-1", "queue": "ü", "lane": "l-2.x", "priority": -limit, "payload": {"k": "☃"}},
        {
            "job_id": "t-2",
            "queue": "ü",
            "priority": limit,
            "payload": [1, 2.5, None],
            "max_recoveries": 7,
            "run_after": later,
            "retry": wd.RetryPolicy(max_attempts=3),
            "timeout": 0.25,
        },
        {"job_id": "t-3", "queue": "v", "payload": "x" * 10_000, "timeout": 86_400},
    ]
    wd.enqueue_many(items)
    stored = {job.job_id: job for job in Job.objects.all()}
    assert [stored[i["job_id"]].priority for i in items] == [-limit, limit, 0]
    assert [stored[i["job_id"]].payload for i in items] == [
        {"k": "☃"},
        [1, 2.5, None],
        "x" * 10_000,
    ]
    assert [stored[i["job_id"]].max_recoveries for i in items] == [None, 7, None]
    assert [stored[i["job_id"]].run_after for i in items] == [None, later, None]
    assert [stored[i["job_id"]].timeout for i in items] == [None, 0.25, 86_400.0]
    assert [stored[i["job_id"]].lane for i in items] == ["l-2.x", "default", "default"]
    assert stored["t-2"].retry_policy == wd.RetryPolicy(max_attempts=3).to_json()
    assert [stored[i["job_id"]].delayed for i in items] == [False, True, False]


#: A value of each optional field that its check refuses.
REFUSED = {
    "lane": "",
    "priority": "1",
    "payload": {1, 2},
    "max_recoveries": -1,
    "run_after": "tomorrow",
    "retry": 3,
    "timeout": -1,
}


@pytest.mark.parametrize("field", sorted(REFUSED))
def test_every_field_an_item_may_hold_reaches_its_check(field):
    assert set(REFUSED) == wd.api.ENQUEUE_FIELDS - {"job_id", "queue"}
    item = {"job_id": "x", "queue": "q", field: REFUSED[field]}
    with pytest.raises(wd.InvalidInput) as refused:
        wd.enqueue_many([{"job_id": "ok", "queue": "q"}, item])
    assert refused.value.field == f"jobs[1].{field}"
    assert not Job.objects.exists()


def test_a_batch_read_for_its_statuses_makes_no_job():
    """A result makes its ``Job`` when ``job`` is first read: a batch whose results are
    read only for their status holds no ``Job`` of it; a result read holds its ``Job``,
    not the call's requests."""

    def made() -> list[str]:
        return sorted(
            o.job_id
            for o in gc.get_objects()
            if type(o) is Job and o.__dict__.get("job_id", "").startswith("lazy")
        )

    results = wd.enqueue_many([{"job_id": f"lazy{i}", "queue": "q"} for i in range(3)])
    assert [r.status for r in results] == ["queued"] * 3
    assert made() == []
    assert results[1].job.job_id == "lazy1"
    assert made() == ["lazy1"]
    assert results[1].job is results[1].job

    # Once read, a result holds its Job alone: not the call's requests.
    kept = results[1]
    del results
    gc.collect()
    requests = [o for o in gc.get_objects() if type(o) is NewJob and o.job_id.startswith("lazy")]
    assert requests == []
    assert kept.job.job_id == "lazy1"


def test_a_result_is_the_enqueue_result_it_stands_for():
    """Read, compared, hashed, copied, pickled and replaced as an ``EnqueueResult`` made
    with its job; frozen as one; the same ``Job`` at every read."""
    (result,) = wd.enqueue_many([{"job_id": "r1", "queue": "q", "payload": [1, "x"]}])
    job = result.job
    assert result.job is job
    plain = wd.EnqueueResult(status="queued", job=wd.get_job("r1"))
    assert result == plain and plain == result and hash(result) == hash(plain)
    assert repr(result) == repr(plain)
    for copied in (copy.copy(result), copy.deepcopy(result), pickle.loads(pickle.dumps(result))):
        assert copied == plain and copied.job.payload == [1, "x"]
    assert dataclasses.replace(result, status="duplicate").status == "duplicate"
    assert dataclasses.replace(result, status="duplicate").job is job
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.job = plain.job  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = "duplicate"  # type: ignore[misc]
    assert result != wd.EnqueueResult(status="duplicate", job=job)


def test_a_result_read_by_two_threads_at_once_gives_each_its_job():
    """Two threads reading one unread result: the second may find the job made by the first
    while it makes its own. Arranged without threads: the second read runs inside the
    first's making of the job (where another thread could be switched in)."""
    (result,) = wd.enqueue_many([{"job_id": "both", "queue": "q"}])
    written = result._written  # type: ignore[attr-defined]
    make = written.job
    inner: list[Job] = []

    def made_while_another_reads(index: int) -> Job:
        written.job = make  # the other read makes it at once
        inner.append(result.job)
        return make(index)

    written.job = made_while_another_reads
    assert result.job.job_id == "both"
    assert inner[0].job_id == "both"
    assert result.job is result.job
