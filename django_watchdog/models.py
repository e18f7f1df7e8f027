"""The job, queue and worker rows, with every row rule as a named database constraint."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Q

from .domain import validation
from .domain.as_stored import check_decodes
from .domain.states import Outcome, State
from .fields import StrictJSONField

QUEUED, RUNNING, SETTLED = State.QUEUED.value, State.RUNNING.value, State.SETTLED.value
PENDING = (QUEUED, RUNNING)
REASONED = (Outcome.FAILED.value, Outcome.INTERRUPTED.value)
#: The pending (queued or running) jobs as the ``lane_pending`` index's condition says them:
#: no outcome yet, the same rows by the state rules below. A read of pending jobs filters
#: by it to use that index. The queue head's and the settle's statements say a state, never
#: this, so however stale the statistics (which may say no job is queued), the planner
#: cannot walk every pending job there to find one queue's.
PENDING_JOBS = Q(outcome__isnull=True)
#: The settled jobs that did not complete, as the ``unsuccessful`` index's condition says
#: them. SQLite uses a partial index only for a query that repeats its condition term for
#: term: an outcome other than completed does not prove ``NOT outcome = 'completed'`` there.
UNSUCCESSFUL_JOBS = Q(state=SETTLED) & ~Q(outcome=Outcome.COMPLETED.value)


#: Django's warnings on MariaDB that migration ``0009_mariadb_schema`` answers: conditions
#: of partial indexes and unique constraints (rebuilt there as generated-column indexes)
#: and unique text over 255 characters (256 x 4 bytes fits InnoDB's 3,072-byte keys).
MARIADB_ANSWERED = frozenset({"models.W036", "models.W037", "mysql.W003"})


class MariadbAnswered:
    """A model whose MariaDB warnings (``MARIADB_ANSWERED``) migration 0009 answers: they
    are left out of its checks, so ``manage.py check`` stays quiet for watchdog's tables."""

    @classmethod
    def check(cls, **kwargs: Any) -> list[Any]:
        found: list[Any] = super().check(**kwargs)  # type: ignore[misc]
        return [message for message in found if message.id not in MARIADB_ANSWERED]


class Job(MariadbAnswered, models.Model):
    """One unit of work, named by its caller-chosen ``job_id``.

    ``position`` is the job's place in enqueue order (its ``id``, or for a delayed job the
    next id once it is due). ``ready`` marks the jobs a claim may take: the head of a queue
    with nothing running, and queued jobs with a recorded cancellation. The store keeps it
    true while holding the queue's row lock; the claim index covers only these rows.
    """

    id = models.BigAutoField(primary_key=True)
    job_id = models.CharField(max_length=256, unique=True)
    queue = models.CharField(max_length=256)
    lane = models.CharField(max_length=64, default="default")
    priority = models.BigIntegerField(default=0)
    payload = StrictJSONField(null=True, blank=True)
    max_recoveries = models.BigIntegerField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=[(s.value, s.value) for s in State])
    outcome = models.CharField(
        max_length=16, null=True, blank=True, choices=[(o.value, o.value) for o in Outcome]
    )
    failure_reason = models.CharField(max_length=200, null=True, blank=True)
    recovery_count = models.BigIntegerField(default=0)
    claim_token = models.CharField(max_length=64, null=True, blank=True)
    claimed_by = models.CharField(max_length=64, null=True, blank=True)
    cancellation_id = models.CharField(max_length=300, null=True, blank=True)
    ready = models.BooleanField(default=False)
    feed_position = models.BigIntegerField(null=True, blank=True)
    result = StrictJSONField(null=True, blank=True)
    traceback = models.TextField(null=True, blank=True)
    enqueued_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    settled_at = models.DateTimeField(null=True, blank=True)
    position = models.BigIntegerField(null=True, blank=True)
    run_after = models.DateTimeField(null=True, blank=True)
    delayed = models.BooleanField(default=False)
    retry_at = models.DateTimeField(null=True, blank=True)
    attempts = models.BigIntegerField(default=0)
    retry_policy = StrictJSONField(null=True, blank=True)
    timeout = models.FloatField(null=True, blank=True)
    #: Who recorded the cancellation intent (``admin:<username>``, ``cli:<os user>``, or
    #: what an API caller passed); ``None`` when nobody said.
    cancellation_requested_by = models.CharField(max_length=150, null=True, blank=True)
    #: The ``job_id`` this job re-runs (``rerun()``); a plain id, so pruning the original
    #: leaves the re-run as it is.
    rerun_of = models.CharField(max_length=256, null=True, blank=True)
    #: Who asked for the re-run, as ``cancellation_requested_by``.
    rerun_requested_by = models.CharField(max_length=150, null=True, blank=True)
    #: The trace context the job was enqueued in, as OpenTelemetry's propagators wrote it
    #: (``{"traceparent": …, "tracestate": …}``); its run's span continues that trace.
    #: ``None`` when no span was active (``django_watchdog.tracing``). A plain JSON field:
    #: a value edited into nonsense is ignored, never a reason not to run the job.
    trace_context = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "watchdog_job"
        ordering = ("id",)
        # On PostgreSQL the CHECKs below are one constraint calling one function (migration
        # 0018, which says how a change of one of them is migrated there).
        constraints = (
            models.CheckConstraint(
                condition=Q(state__in=[s.value for s in State]), name="watchdog_job_state_known"
            ),
            models.CheckConstraint(
                condition=Q(outcome__isnull=True) | Q(outcome__in=[o.value for o in Outcome]),
                name="watchdog_job_outcome_known",
            ),
            models.CheckConstraint(
                condition=~Q(state=QUEUED) | Q(outcome__isnull=True, claim_token__isnull=True),
                name="watchdog_job_queued_unclaimed",
            ),
            models.CheckConstraint(
                condition=~Q(state=RUNNING) | Q(outcome__isnull=True, claim_token__isnull=False),
                name="watchdog_job_running_claimed",
            ),
            models.CheckConstraint(
                condition=~Q(state=SETTLED) | Q(outcome__isnull=False),
                name="watchdog_job_settled_has_outcome",
            ),
            models.CheckConstraint(
                # outcome IS NOT NULL: with a NULL outcome "outcome IN (...)" is NULL, and a
                # NULL check passes, so a queued row could carry a reason.
                condition=Q(
                    outcome__isnull=False, outcome__in=REASONED, failure_reason__isnull=False
                )
                | (~Q(outcome__in=REASONED) | Q(outcome__isnull=True))
                & Q(failure_reason__isnull=True),
                name="watchdog_job_reason_iff_failed",
            ),
            models.CheckConstraint(
                condition=Q(failure_reason__isnull=True) | ~Q(failure_reason=""),
                name="watchdog_job_reason_not_empty",
            ),
            models.CheckConstraint(
                condition=Q(
                    priority__gte=-validation.MAX_SAFE_INTEGER,
                    priority__lte=validation.MAX_SAFE_INTEGER,
                ),
                name="watchdog_job_priority_range",
            ),
            models.CheckConstraint(
                condition=Q(max_recoveries__isnull=True) | Q(max_recoveries__gte=0),
                name="watchdog_job_max_recoveries_not_negative",
            ),
            models.CheckConstraint(
                condition=Q(recovery_count__gte=0), name="watchdog_job_recovery_count_not_negative"
            ),
            models.CheckConstraint(
                condition=~Q(job_id="") & ~Q(queue="") & ~Q(lane=""),
                name="watchdog_job_names_not_empty",
            ),
            models.CheckConstraint(
                condition=Q(ready=False) | Q(state=QUEUED), name="watchdog_job_ready_is_queued"
            ),
            models.CheckConstraint(
                condition=Q(delayed=False, position__isnull=False)
                | Q(
                    delayed=True,
                    state=QUEUED,
                    ready=False,
                    position__isnull=True,
                    run_after__isnull=False,
                ),
                name="watchdog_job_delayed_unpositioned",
            ),
            models.CheckConstraint(
                condition=Q(attempts__gte=0), name="watchdog_job_attempts_not_negative"
            ),
            models.CheckConstraint(
                condition=Q(timeout__isnull=True) | Q(timeout__gt=0),
                name="watchdog_job_timeout_positive",
            ),
            # SPEC §4.2 in the database: at most one running job per queue.
            models.UniqueConstraint(
                fields=("queue",),
                condition=Q(state=RUNNING),
                name="watchdog_job_one_running_per_queue",
            ),
            # As the seed's column: one intent id names one job's cancellation. Partial,
            # so an enqueue (no intent) writes no entry to this index.
            models.UniqueConstraint(
                fields=("cancellation_id",),
                condition=Q(cancellation_id__isnull=False),
                name="watchdog_job_cancellation_id_unique",
            ),
        )
        indexes = (
            # Claim: the best ready job, all lanes or one lane.
            models.Index(
                fields=["-priority", "position"],
                condition=Q(ready=True),
                name="watchdog_job_claim",
            ),
            models.Index(
                fields=["lane", "-priority", "position"],
                condition=Q(ready=True),
                name="watchdog_job_claim_lane",
            ),
            # Queue head: the best queued job of one queue, a retry pinned at its head, and
            # a queue's ready head (``cancellation_id IS NULL``: a cancelled job made ready
            # to settle unrun is no head). That term keeps claims off ``watchdog_job_ready``,
            # whose entries come in no claim order (migration 0019).
            models.Index(
                fields=["queue", "-priority", "position"],
                condition=Q(state=QUEUED, delayed=False),
                name="watchdog_job_head",
            ),
            models.Index(
                fields=["queue"],
                condition=Q(state=QUEUED, retry_at__isnull=False),
                name="watchdog_job_retrying",
            ),
            models.Index(
                fields=["queue"],
                condition=Q(ready=True, cancellation_id__isnull=True),
                name="watchdog_job_ready",
            ),
            # Delayed jobs and retries coming due.
            models.Index(fields=["run_after"], condition=Q(delayed=True), name="watchdog_job_due"),
            # A queue's delayed jobs (whether a queue has pending jobs, the queue list's and
            # status's counts, idle task queues): without it each read walked the due index
            # over every delayed job. Not on MariaDB (migration 0014), where the head
            # index's prefix (queue, state, delayed) finds them.
            models.Index(
                fields=["queue", "run_after"],
                condition=Q(delayed=True),
                name="watchdog_job_queue_delayed",
            ),
            models.Index(
                fields=["retry_at"],
                condition=Q(state=QUEUED, retry_at__isnull=False),
                name="watchdog_job_retry_due",
            ),
            # Settled feed: positions of settled rows, and the first pending position.
            # Only positioned rows: a job enters these when a feed read numbers it, so
            # enqueue, claim and settle (whose rows are mostly not numbered yet) skip them.
            models.Index(
                fields=["feed_position"],
                condition=Q(state=SETTLED, feed_position__isnull=False),
                name="watchdog_job_feed_at",
            ),
            models.Index(
                fields=["lane", "feed_position"],
                condition=Q(state=SETTLED, feed_position__isnull=False),
                name="watchdog_job_feed_lane_at",
            ),
            models.Index(
                fields=["feed_position"],
                condition=Q(state__in=PENDING, feed_position__isnull=False),
                name="watchdog_job_feed_pending_at",
            ),
            models.Index(
                fields=["lane", "feed_position"],
                condition=Q(state__in=PENDING, feed_position__isnull=False),
                name="watchdog_job_feed_lane_pend_at",
            ),
            models.Index(
                fields=["id"],
                condition=Q(feed_position__isnull=True, delayed=False),
                name="watchdog_job_unpositioned",
            ),
            # fail_lane, the lanes' counts (status, metrics, the admin's lane filter).
            models.Index(
                fields=["lane", "state", "id"],
                condition=PENDING_JOBS,
                name="watchdog_job_lane_pending",
            ),
            # A worker's running jobs (recovery, the admin). ``claimed_by IS NOT NULL`` keeps
            # it from a queue's check for a running job (``queue``, ``state``), which
            # ``one_running_per_queue`` serves: on statistics gathered when no job ran, both
            # look empty and the planner walked this one, every running job, in each settle.
            models.Index(
                fields=["claimed_by"],
                condition=Q(claimed_by__isnull=False, state=RUNNING),
                name="watchdog_job_running",
            ),
            # Retention: the settled jobs older than an age, oldest first, walked in bounded
            # batches without reading the newer ones (one entry per settle).
            models.Index(
                fields=["settled_at", "id"],
                condition=Q(state=SETTLED),
                name="watchdog_job_settled_at",
            ),
            # latest_settled(): the settled job of a queue latest in its order.
            models.Index(
                fields=["queue", "-position"],
                condition=Q(state=SETTLED),
                name="watchdog_job_queue_latest",
            ),
            # The admin's outcome (and outcome + lane) filters: the few jobs that did not
            # complete, found without scanning the completed ones.
            models.Index(
                fields=["outcome", "lane", "-id"],
                condition=UNSUCCESSFUL_JOBS,
                name="watchdog_job_unsuccessful",
            ),
            # The re-runs of a job (its page, the next re-run number).
            models.Index(
                fields=["rerun_of"],
                condition=Q(rerun_of__isnull=False),
                name="watchdog_job_reruns",
            ),
        )

    def __str__(self) -> str:
        return self.job_id

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any, **kwargs: Any) -> Job:
        """Refuse a row that breaks the grammar no constraint can hold (edited by hand):
        ``WatchdogError(kind="store_unavailable")``, unless reading as stored."""
        return check_decodes(super().from_db(db, field_names, values, **kwargs))

    @property
    def duration(self) -> float | None:
        """Seconds from start to settlement, when both are known."""
        if self.started_at is None or self.settled_at is None:
            return None
        return (self.settled_at - self.started_at).total_seconds()


class PrunedJob(MariadbAnswered, models.Model):
    """The identity of a job retention deleted, kept while ``WATCHDOG["ID_RETENTION"]`` asks.

    Enqueue consults it only when that setting is on and only for ids it did not find as
    jobs: an id found here is a ``duplicate``, so the job does not run again. Rows older
    than ``ID_RETENTION`` (by ``settled_at``) are deleted by the same prune passes.
    """

    job_id = models.CharField(max_length=256, primary_key=True)
    queue = models.CharField(max_length=256)
    lane = models.CharField(max_length=64)
    outcome = models.CharField(max_length=16, choices=[(o.value, o.value) for o in Outcome])
    enqueued_at = models.DateTimeField()
    settled_at = models.DateTimeField()

    class Meta:
        db_table = "watchdog_pruned_job"
        ordering = ("settled_at",)
        indexes = (models.Index(fields=["settled_at"], name="watchdog_pruned_job_settled"),)

    def __str__(self) -> str:
        return self.job_id


class Queue(MariadbAnswered, models.Model):
    """One row per queue in use: the lock every change to that queue takes first.

    Deleted only when no job names it: by the enqueue that created it, undoing itself, and
    for task queues by retention (``store.idle_queues``, under the row's lock). So a queue
    an enqueue creates holds no job yet, and its best new job is its head
    (``store.enqueue``).
    """

    name = models.CharField(max_length=256, primary_key=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "watchdog_queue"
        ordering = ("name",)
        constraints = (
            models.CheckConstraint(condition=~Q(name=""), name="watchdog_queue_name_not_empty"),
        )

    def __str__(self) -> str:
        return self.name


class FeedClock(models.Model):
    """The single row whose lock serialises settled-feed positioning (see ``store.feed``)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    last_position = models.BigIntegerField(default=0)

    class Meta:
        db_table = "watchdog_feed_clock"
        constraints = (
            models.CheckConstraint(condition=Q(id=1), name="watchdog_feed_clock_single"),
        )

    def __str__(self) -> str:
        return f"feed clock at {self.last_position}"


class Worker(models.Model):
    """A running ``watchdog_worker`` process; alive while its heartbeat is recent."""

    worker_id = models.CharField(max_length=64, primary_key=True)
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    lanes = models.JSONField(default=list, blank=True)
    exclude_lanes = models.JSONField(default=list, blank=True)
    concurrency = models.PositiveIntegerField(default=1)
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()

    class Meta:
        db_table = "watchdog_worker"
        ordering = ("worker_id",)
        indexes = (models.Index(fields=["heartbeat_at"], name="watchdog_worker_heartbeat"),)

    def __str__(self) -> str:
        return f"{self.worker_id} ({self.host}:{self.pid})"


class ScheduleState(models.Model):
    """How far a periodic schedule got: every tick up to ``handled_until`` was handled.

    One row per schedule name, created when a worker first sees the schedule; its row lock
    serialises the workers that enqueue the schedule's ticks (see ``store.schedules``).
    """

    name = models.CharField(max_length=200, primary_key=True)
    handled_until = models.DateTimeField()
    last_tick = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "watchdog_schedule"
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name
