"""Enqueue: insert a job once per ``job_id``, idempotently (SPEC §4.1)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from ..conf import setting
from ..domain import validation
from ..domain.errors import InvalidInput, JobConflict
from ..domain.retries import RetryPolicy
from ..domain.values import EnqueueResult
from . import heads, pruned_ids, rows, vendor

if TYPE_CHECKING:
    from ..models import Job


@dataclass(frozen=True, kw_only=True, slots=True)
class NewJob:
    """A validated enqueue request; ``payload_json`` is its canonical text (what the size cap
    counts). A repeat is a duplicate when the stored payload is the same JSON value
    (``validation.json_identity``: numbers compare as numbers)."""

    job_id: str
    queue: str
    lane: str
    priority: int
    payload: Any
    payload_json: str
    max_recoveries: int | None
    run_after: datetime | None = None
    retry: RetryPolicy | None = None
    timeout: float | None = None

    @classmethod
    def parse(
        cls,
        job_id: object,
        *,
        queue: object,
        lane: object,
        priority: object,
        payload: object,
        max_recoveries: object,
        run_after: object = None,
        retry: object = None,
        timeout: object = None,
        max_payload_bytes: int | None = None,
        cap_name: str = "WATCHDOG['MAX_PAYLOAD_BYTES']",
    ) -> NewJob:
        """Validate an enqueue request; the payload cap is ``WATCHDOG['MAX_PAYLOAD_BYTES']``
        unless ``max_payload_bytes`` (named ``cap_name`` in the error) replaces it."""
        if max_payload_bytes is None:
            max_payload_bytes = int(setting("MAX_PAYLOAD_BYTES"))
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise InvalidInput(
                "retry", f"must be a RetryPolicy or None, not {type(retry).__name__}"
            )
        return cls(
            job_id=validation.identifier(job_id, "job_id"),
            queue=validation.identifier(queue, "queue"),
            lane=validation.lane(lane),
            priority=validation.priority(priority),
            payload=payload,
            payload_json=validation.canonical_json(
                payload, "payload", max_bytes=max_payload_bytes, cap_name=cap_name
            ),
            max_recoveries=validation.max_recoveries(max_recoveries),
            run_after=validation.aware_datetime(run_after, "run_after"),
            retry=retry,
            timeout=validation.seconds(timeout, "timeout"),
        )

    @property
    def payload_identity(self) -> Any:
        """What a stored payload must equal for a repeat to be a duplicate."""
        return validation.json_identity(self.payload)

    def differences(self, job: Job) -> list[str]:
        """Fields in which ``job`` differs from this request, in contract order."""
        pairs = (
            ("queue", job.queue == self.queue),
            ("lane", job.lane == self.lane),
            ("priority", job.priority == self.priority),
            ("payload", validation.json_identity(job.payload) == self.payload_identity),
            ("max_recoveries", job.max_recoveries == self.max_recoveries),
            ("run_after", job.run_after == self.run_after),
            ("retry", job.retry_policy == (self.retry.to_json() if self.retry else None)),
            ("timeout", job.timeout == self.timeout),
        )
        return [name for name, same in pairs if not same]


#: PostgreSQL: the jobs of a call as rows, from one array per column, or for a one-job
#: call from plain parameters (which psycopg sends faster than ten one-element arrays).
JOB_ROWS = (
    "AS u(job_id, queue, lane, priority, payload, max_recoveries, delayed, run_after, "
    "retry_policy, timeout, ordinal)"
)
JOBS_FROM_ARRAYS = (
    "unnest(%s::text[], %s::text[], %s::text[], %s::bigint[], %s::jsonb[], %s::bigint[],"
    " %s::boolean[], %s::timestamptz[], %s::jsonb[], %s::double precision[])"
    f" WITH ORDINALITY {JOB_ROWS}"
)
JOB_FROM_VALUES = (
    "(VALUES (%s::text, %s::text, %s::text, %s::bigint, %s::jsonb, %s::bigint, %s::boolean,"
    f" %s::timestamptz, %s::jsonb, %s::double precision, 1::bigint)) {JOB_ROWS}"
)
QUEUES_FROM_ARRAY = "SELECT unnest(%s::text[]), %s"
QUEUE_FROM_VALUES = "VALUES (%s, %s)"
#: PostgreSQL: insert the rows of ``input``, each ``ready`` as ``<READY>`` decides.
_INSERT_JOBS = """
    INSERT INTO watchdog_job
        (id, position, job_id, queue, lane, priority, payload, max_recoveries, state,
         recovery_count, attempts, ready, delayed, run_after, retry_policy, timeout,
         enqueued_at)
    SELECT i.id, CASE WHEN i.delayed THEN NULL ELSE i.id END, i.job_id, i.queue, i.lane,
           i.priority, i.payload, i.max_recoveries, 'queued', 0, 0, <READY>,
           i.delayed, i.run_after, i.retry_policy, i.timeout, <NOW>
      FROM input i
     ORDER BY i.id
    ON CONFLICT (job_id) DO NOTHING
    RETURNING id, job_id, queue, lane, enqueued_at, ready, delayed
"""
#: PostgreSQL, first statement: create the missing queues and lock the others (name order),
#: and enter the jobs of the queues this statement created. Nothing else is in such a queue
#: (queue rows are never deleted, and a concurrent creator waits for ours), so its best
#: non-delayed new job is its head: no probe of other rows, whose snapshot could predate
#: the lock. A row this transaction inserted is as good as locked (no one else sees it,
#: and an insert of the same name waits for us); ``DO UPDATE`` locks an existing row even
#: if it was committed after this statement's snapshot (a same-value update, so a HOT
#: one). ``xmax = 0`` tells the rows inserted here. One result row per held queue, with
#: the jobs entered into it (none for a queue that existed).
ENTER_NEW_QUEUES_POSTGRES = (
    """
WITH held AS (
    INSERT INTO watchdog_queue (name, created_at) {queues}
    ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
    RETURNING name, xmax = 0 AS created
),
input AS (
    SELECT nextval(pg_get_serial_sequence('watchdog_job', 'id')) AS id, u.*
      FROM {jobs}
     WHERE u.queue IN (SELECT name FROM held WHERE created)
     ORDER BY u.ordinal
),
best AS (
    SELECT DISTINCT ON (queue) id FROM input
     WHERE NOT delayed
     ORDER BY queue, priority DESC, id
),
inserted AS ("""
    + _INSERT_JOBS.replace("<READY>", "i.id IN (SELECT id FROM best)")
    + """)
SELECT held.name, held.created,
       inserted.id, inserted.job_id, inserted.enqueued_at, inserted.ready,
       CASE WHEN inserted.ready OR inserted.delayed THEN pg_notify(%s, inserted.lane) END
  FROM held LEFT JOIN inserted ON inserted.queue = held.name
"""
)
#: PostgreSQL, second statement, for the jobs of queues that existed (locked by the first,
#: so this statement's snapshot is current): insert them and settle each queue's head.
#: A queue's best new job becomes its head when nothing runs or waits to retry there and
#: no queued job ranks at least as high (older jobs win ties); the head it displaces
#: loses its ready flag. Workers of the lanes given a ready job (or a delayed one, whose
#: due time they must learn) are woken.
#: The three probes are ``LIMIT 1`` subqueries, not ``NOT EXISTS``: PostgreSQL may turn
#: ``NOT EXISTS`` into an anti-join that reads a whole index (every queued job of every
#: queue) when a young table's statistics say it is tiny; a subquery with ``LIMIT`` stays
#: a probe on the queue's index entries, whatever the statistics.
INSERT_WITH_HEADS_POSTGRES = (
    """
WITH input AS (
    SELECT nextval(pg_get_serial_sequence('watchdog_job', 'id')) AS id, u.*
      FROM {jobs}
     ORDER BY u.ordinal
),
best AS (
    SELECT DISTINCT ON (queue) id, queue, priority FROM input
     WHERE NOT delayed
     ORDER BY queue, priority DESC, id
),
promoted AS (
    SELECT b.id, b.queue FROM best b
     WHERE (SELECT 1 FROM watchdog_job j
             WHERE j.queue = b.queue AND j.state = 'running' LIMIT 1) IS NULL
       AND (SELECT 1 FROM watchdog_job j
             WHERE j.queue = b.queue AND j.state = 'queued' AND j.retry_at IS NOT NULL
             LIMIT 1) IS NULL
       AND (SELECT 1 FROM watchdog_job j
             WHERE j.queue = b.queue AND j.state = 'queued' AND j.delayed = FALSE
               AND j.priority >= b.priority
             LIMIT 1) IS NULL
),
inserted AS ("""
    + _INSERT_JOBS.replace("<READY>", "p.id IS NOT NULL").replace(
        "FROM input i", "FROM input i LEFT JOIN promoted p ON p.id = i.id"
    )
    + """),
demoted AS (
    UPDATE watchdog_job j SET ready = FALSE FROM promoted p
     WHERE j.queue = p.queue AND j.ready AND j.cancellation_id IS NULL
    RETURNING 1
)
SELECT inserted.id, inserted.job_id, inserted.enqueued_at, inserted.ready,
       CASE WHEN inserted.ready OR inserted.delayed THEN pg_notify(%s, inserted.lane) END
  FROM inserted
"""
)
#: SQLite (one writer at a time, so every read is current). ``RETURNING`` yields only the
#: rows inserted, so the queues created here.
CREATE_QUEUES_SQLITE = (
    "INSERT INTO watchdog_queue (name, created_at) VALUES {rows}"
    " ON CONFLICT (name) DO NOTHING RETURNING name"
)
#: Ids follow the last one AUTOINCREMENT gave (read in the statement), in the order of the
#: rows' first column, so a position is its job's id as on PostgreSQL. ``ready`` comes
#: decided for the jobs of queues created by this call; ``REFRESH_HEADS_SQLITE`` settles
#: the others. (``WHERE TRUE`` parses the upsert clause as such after a ``SELECT``.)
INSERT_ROWS_SQLITE = """
INSERT INTO watchdog_job
    (id, position, job_id, queue, lane, priority, payload, max_recoveries, delayed, run_after,
     retry_policy, timeout, ready, state, recovery_count, attempts, enqueued_at)
SELECT last.id + v.n, CASE WHEN v.column8 THEN NULL ELSE last.id + v.n END,
       v.column2, v.column3, v.column4, v.column5, v.column6, v.column7, v.column8,
       v.column9, v.column10, v.column11, v.column12, 'queued', 0, 0, <NOW>
  FROM (SELECT row_number() OVER (ORDER BY column1) AS n, * FROM (VALUES {rows})) AS v,
       (SELECT COALESCE(MAX(seq), 0) AS id FROM sqlite_sequence
         WHERE name = 'watchdog_job') AS last
 WHERE TRUE
 ORDER BY v.n
ON CONFLICT (job_id) DO NOTHING
RETURNING id, job_id, enqueued_at, ready
"""
INSERT_ROW_SQLITE = "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
#: The ``ready`` flag of every current head and every new job of the given queues, from the
#: queue's head (heads.HEAD): the running job, else a job waiting to retry, else the best.
REFRESH_HEADS_SQLITE = f"""
UPDATE watchdog_job AS w SET ready = CASE WHEN w.id = (
    SELECT CASE WHEN EXISTS (SELECT 1 FROM watchdog_job r
                              WHERE r.queue = w.queue AND r.state = 'running') THEN NULL
           ELSE {heads.NEXT_HEAD.format(queue="w.queue")}
           END) THEN 1 ELSE 0 END
 WHERE w.queue IN ({{rows}}) AND w.state = 'queued' AND w.cancellation_id IS NULL
   AND (w.ready = <TRUE> OR w.id >= %s)
RETURNING id, ready
"""


def enqueue(using: str, new: NewJob) -> EnqueueResult:
    """Insert ``new`` and make it its queue's head if it outranks the rest.

    A job with ``run_after`` in the future is *delayed*: it is not in its queue's order
    (and blocks nothing) until it is due; ``store.due`` then gives it its place.
    """
    return enqueue_many(using, [new])[0]


def enqueue_many(using: str, batch: Sequence[NewJob]) -> list[EnqueueResult]:
    """Insert every job of ``batch`` in one transaction, all or nothing.

    Each distinct queue is locked (or created) once, in name order, and each queue's head
    is settled once, with all its new jobs in: a few statements for the whole batch. A
    queue the call creates needs no look at other rows: its best new job is its head.

    No savepoint unless ``queue_changed`` receivers are connected (a raising receiver then
    rolls back only this call), so an enqueue inside a view's transaction costs no extra
    statements: a conflicting repeat (rare) undoes this call's rows by hand before
    ``JobConflict`` is raised, outside the block, leaving the caller's transaction usable.
    """
    if pruned_ids.kept():
        pruned = pruned_ids.duplicates(using, [new.job_id for new in batch])
        if pruned:
            return _beside_pruned(using, batch, pruned)
    now = timezone.now()
    delays = [new.run_after is not None and new.run_after > now for new in batch]
    with transaction.atomic(using=using, savepoint=heads.listening()):
        if vendor.is_postgres(using):
            jobs, created = _insert_postgres(using, batch, delays)
        else:
            jobs, created = _insert_sqlite(using, batch, delays, now)
        if any(job is None for job in jobs):
            results = _resolve_repeats(using, batch, jobs, created)
        else:
            results = [EnqueueResult(status="queued", job=job) for job in jobs if job]
        if not isinstance(results, JobConflict):
            _announce(using, (r.job for r in results if r.status == "queued"))
    if isinstance(results, JobConflict):
        raise results  # outside the block: the caller's transaction stays usable
    return results


def _beside_pruned(
    using: str, batch: Sequence[NewJob], pruned: dict[str, EnqueueResult]
) -> list[EnqueueResult]:
    """Enqueue the jobs of ``batch`` whose ids were not pruned; the pruned ones are
    duplicates (whatever their other arguments: the pruned job's are gone)."""
    rest = [new for new in batch if new.job_id not in pruned]
    written = iter(enqueue_many(using, rest) if rest else [])
    return [pruned[new.job_id] if new.job_id in pruned else next(written) for new in batch]


def _announce(using: str, jobs: Iterable[Job]) -> None:
    """``queue_changed`` for each queue that gained a job, in name order."""
    if heads.listening():
        for queue in sorted({job.queue for job in jobs}):
            heads.announce(queue, None, using=using)


def _insert_postgres(
    using: str, batch: Sequence[NewJob], delays: Sequence[bool]
) -> tuple[list[Job | None], set[str]]:
    """The new jobs in ``batch`` order (``None`` for a repeat) and the queues created.

    One statement when every queue is new (the common case: a queue per object); a
    second, sent once the first has locked them, for the jobs of queues that existed.
    """
    from ..conf import setting

    channel = setting("NOTIFY_CHANNEL")
    per_job = [_columns(using, new, delayed) for new, delayed in zip(batch, delays, strict=True)]
    stamp = vendor.param_datetime(using, timezone.now())
    written = _Written(using, batch, delays)
    created: set[str] = set()
    if len(batch) == 1:
        sql = ENTER_NEW_QUEUES_POSTGRES.format(queues=QUEUE_FROM_VALUES, jobs=JOB_FROM_VALUES)
        params = [batch[0].queue, stamp, *per_job[0], channel]
    else:
        sql = ENTER_NEW_QUEUES_POSTGRES.format(queues=QUEUES_FROM_ARRAY, jobs=JOBS_FROM_ARRAYS)
        queues = sorted({new.queue for new in batch})
        params = [queues, stamp, *_by_column(per_job), channel]
    for name, new_queue, *entered in vendor.fetch(using, sql, params):
        if new_queue:
            created.add(name)
        if entered[0] is not None:
            written.add(*entered[:4])
    rest = [values for new, values in zip(batch, per_job, strict=True) if new.queue not in created]
    if len(rest) == 1:
        sql = INSERT_WITH_HEADS_POSTGRES.format(jobs=JOB_FROM_VALUES)
        params = [*rest[0], channel]
    elif rest:
        sql = INSERT_WITH_HEADS_POSTGRES.format(jobs=JOBS_FROM_ARRAYS)
        params = [*_by_column(rest), channel]
    for found in vendor.fetch(using, sql, params) if rest else ():
        written.add(*found[:4])
    return written.in_order(), created


def _by_column(per_job: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    return [list(column) for column in zip(*per_job, strict=True)]


def _insert_sqlite(
    using: str, batch: Sequence[NewJob], delays: Sequence[bool], now: datetime
) -> tuple[list[Job | None], set[str]]:
    """``_insert_postgres`` for SQLite, in multi-row statements."""
    queues = sorted({new.queue for new in batch})
    stamp = vendor.param_datetime(using, now)
    found = vendor.fetch_rows(using, CREATE_QUEUES_SQLITE, "(%s, %s)", [(q, stamp) for q in queues])
    created = {name for (name,) in found}
    heads_of_created = _best_new_jobs(batch, delays, created)
    values = [
        (index, *_columns(using, new, delays[index]), index in heads_of_created)
        for index, new in enumerate(batch)
    ]
    written = _Written(using, batch, delays)
    for found_row in vendor.fetch_rows(using, INSERT_ROWS_SQLITE, INSERT_ROW_SQLITE, values):
        written.add(*found_row)
    jobs = written.in_order()
    entered = sorted({job.queue for job in jobs if job and not job.delayed} - created)
    if entered:
        first_id = min(job.pk for job in jobs if job)
        ready = dict(
            vendor.fetch_rows(
                using, REFRESH_HEADS_SQLITE, "%s", [(q,) for q in entered], extra=[first_id]
            )
        )
        for job in jobs:
            if job is not None and job.pk in ready:
                job.ready = bool(ready[job.pk])
    return jobs, created


class _Written:
    """The jobs a call wrote, from the values it wrote (as ``Model.objects.create()`` returns
    the caller's values) and those the database chose: id, ``enqueued_at``, ``ready``."""

    def __init__(self, using: str, batch: Sequence[NewJob], delays: Sequence[bool]) -> None:
        self.using, self.batch, self.delays = using, batch, delays
        self.first: dict[str, int] = {}
        for index, new in enumerate(batch):
            self.first.setdefault(new.job_id, index)
        self.jobs: dict[str, Job] = {}
        #: A statement stamps its rows alike, so each distinct stamp is decoded once.
        self.stamps: dict[Any, Any] = {}

    def add(self, pk: int, job_id: str, enqueued_at: Any, ready: Any) -> None:
        index = self.first[job_id]
        new, delayed = self.batch[index], self.delays[index]
        at, values = rows.at(), rows.new_row()
        values[at.id] = pk
        values[at.job_id] = new.job_id
        values[at.queue] = new.queue
        values[at.lane] = new.lane
        values[at.priority] = new.priority
        values[at.payload] = new.payload
        values[at.max_recoveries] = new.max_recoveries
        values[at.ready] = bool(ready)
        values[at.delayed] = delayed
        values[at.position] = None if delayed else pk
        values[at.run_after] = new.run_after
        values[at.retry_policy] = new.retry.to_json() if new.retry else None
        values[at.timeout] = new.timeout
        values[at.enqueued_at] = self._stamp(enqueued_at)
        self.jobs[job_id] = rows.written_job(self.using, values)

    def _stamp(self, raw: Any) -> Any:
        if raw not in self.stamps:
            self.stamps[raw] = rows.decode(self.using, "enqueued_at", raw)
        return self.stamps[raw]

    def in_order(self) -> list[Job | None]:
        """Per job of the batch, the job written for it; ``None`` for a repeat."""
        return [self.jobs.pop(new.job_id, None) for new in self.batch]


def _best_new_jobs(batch: Sequence[NewJob], delays: Sequence[bool], queues: set[str]) -> set[int]:
    """Indexes in ``batch`` of each of ``queues``' best non-delayed job (older wins ties)."""
    best: dict[str, int] = {}
    for index, new in enumerate(batch):
        if delays[index] or new.queue not in queues:
            continue
        held = best.get(new.queue)
        if held is None or new.priority > batch[held].priority:
            best[new.queue] = index
    return set(best.values())


def _resolve_repeats(
    using: str, batch: Sequence[NewJob], jobs: Sequence[Job | None], created: set[str]
) -> list[EnqueueResult] | JobConflict:
    """Compare repeated ids (``None`` in ``jobs``) with their stored jobs; on a conflict,
    undo the whole call and return it.

    A repeat the statement meant to make its queue's head was not inserted, so the heads
    of the queues with repeats are recomputed.
    """
    from ..models import Job, Queue

    repeats = [new for new, job in zip(batch, jobs, strict=True) if job is None]
    stored = Job.objects.using(using).in_bulk([new.job_id for new in repeats], field_name="job_id")
    fresh = [job for job in jobs if job is not None]
    results = []
    for new, job in zip(batch, jobs, strict=True):
        if job is not None:
            results.append(EnqueueResult(status="queued", job=job))
            continue
        differing = new.differences(stored[new.job_id])
        if differing:
            Job.objects.using(using).filter(pk__in=[job.pk for job in fresh]).delete()
            Queue.objects.using(using).filter(name__in=sorted(created)).delete()
            for queue in sorted({n.queue for n in batch} - created):
                heads.refresh(using, queue)
            return JobConflict(new.job_id, differing)
        results.append(EnqueueResult(status="duplicate", job=stored[new.job_id]))
    for queue in sorted({new.queue for new in repeats}):
        entered = [job.pk for job in fresh if job.queue == queue]
        head = heads.refresh(using, queue, entered=entered)
        for job in fresh:
            if job.queue == queue:
                job.ready = head.state == "queued" and head.job_id == job.job_id
    return results


def _columns(using: str, new: NewJob, delayed: bool) -> tuple[Any, ...]:
    return (
        new.job_id,
        new.queue,
        new.lane,
        new.priority,
        vendor.param_json(using, new.payload),
        new.max_recoveries,
        delayed,
        vendor.param_datetime(using, new.run_after),
        vendor.param_json(using, new.retry.to_json() if new.retry else None),
        new.timeout,
    )
