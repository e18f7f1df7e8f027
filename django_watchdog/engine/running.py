"""The view of a job that a handler receives."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..models import Job


class RunningJob:
    """A claimed job as its handler sees it; ``cancel_requested`` stays fresh while it runs.

    The worker sets the flag when it sees a cancellation intent (at least every heartbeat);
    a handler that checks it can stop early, and the job then settles ``cancelled``.
    """

    def __init__(
        self, job: Job, *, claim_token: str, worker_id: str, settle_logs_traceback: bool = False
    ) -> None:
        self.model = job
        self.job_id: str = job.job_id
        self.queue: str = job.queue
        self.lane: str = job.lane
        self.priority: int = job.priority
        self.payload: Any = job.payload
        self.recovery_count: int = job.recovery_count
        self.enqueued_at: datetime = job.enqueued_at
        self.started_at: datetime | None = job.started_at
        self.attempts: int = job.attempts
        self.worker_id = worker_id
        self.claim_token = claim_token
        #: Monotonic time at which ``cancel_requested`` turns on, for a job with a timeout.
        self.deadline: float | None = None
        self.timeout: float | None = None
        #: Set when the deadline passed: ``cancel_requested`` is on because of the timeout.
        self.timed_out = False
        #: Set when the worker gave up on this run (timeout): its result is discarded.
        self.abandoned = False
        #: The handler this run called, once called (``job_started`` was sent).
        self.handler: Callable[..., Any] | None = None
        #: What the handler raised, if it raised: the final failure's log line carries it.
        self.error: BaseException | None = None
        #: The run's OpenTelemetry span while tracing is on (engine/tracing.py), else None.
        self.span: Any = None
        #: True when the worker's settle line will log ``error`` with its traceback (the
        #: worker's runs; not ``testing``'s): a handler need not log that traceback again.
        self.settle_logs_traceback = settle_logs_traceback
        self._cancel = threading.Event()
        if job.cancellation_id is not None:
            self._cancel.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def request_cancel(self) -> None:
        self._cancel.set()

    def __repr__(self) -> str:
        return f"<RunningJob {self.job_id!r} queue={self.queue!r} lane={self.lane!r}>"
