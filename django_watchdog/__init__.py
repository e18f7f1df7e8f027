"""django-watchdog: a durable, transactional job queue in your Django database.

The names of SPEC §5 are importable from here. The verbs import the models lazily, so
``import django_watchdog`` works before Django's app registry is ready.
"""

from .api import (
    acancel,
    aenqueue,
    aenqueue_many,
    aget_job,
    aqueue_head,
    cancel,
    enqueue,
    enqueue_many,
    fail_lane,
    get_job,
    latest_settled,
    purge_queued,
    queue_head,
    rerun,
    settled_jobs,
)
from .domain.errors import InvalidInput, JobConflict, OutcomeUnknown, WatchdogError
from .domain.retries import RetryPolicy
from .domain.values import (
    CancelResult,
    EnqueueResult,
    LaneFailure,
    QueueHead,
    SettledRecord,
)
from .handlers import handler
from .schedules import schedule

__all__ = [
    "CancelResult",
    "EnqueueResult",
    "InvalidInput",
    "JobConflict",
    "LaneFailure",
    "OutcomeUnknown",
    "QueueHead",
    "RetryPolicy",
    "SettledRecord",
    "WatchdogError",
    "acancel",
    "aenqueue",
    "aenqueue_many",
    "aget_job",
    "aqueue_head",
    "cancel",
    "enqueue",
    "enqueue_many",
    "fail_lane",
    "get_job",
    "handler",
    "latest_settled",
    "purge_queued",
    "queue_head",
    "rerun",
    "schedule",
    "settled_jobs",
]

__version__ = "0.1.0"
