"""OpenTelemetry spans for enqueue (the ``opentelemetry`` extra); nothing without it.

``enqueue()``, ``enqueue_many()`` (and their async twins) and the task backend's enqueue
each run in a span (``watchdog.enqueue``, kind ``PRODUCER``), and every job they write
carries the span's trace context in ``Job.trace_context``: what the configured
propagators inject (by default W3C ``traceparent`` and ``tracestate``, and ``baggage``
if any). The worker makes that context its run's parent (``engine/tracing.py``), so one
trace goes from the request that enqueued a job to the job's run.

Tracing is on once the process has set up a tracer provider. When it is off, nothing is
stored (the insert binds ``NULL``) and nothing of OpenTelemetry is called; no statement is
added either way.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .engine.tracing import JOB_ID, LANE, QUEUE, active

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from .domain.values import EnqueueResult

ENQUEUE_SPAN = "watchdog.enqueue"
#: Enqueue span attributes beside the run's (``watchdog.job_id``, ``.queue``, ``.lane``).
STATUS = "watchdog.status"
JOB_COUNT = "watchdog.job_count"
QUEUED_COUNT = "watchdog.queued_count"
TASK = "watchdog.task"


class EnqueueSpan:
    """An enqueue's span: the context to store with its jobs, and how the enqueue ended."""

    def __init__(self, span: Span | None, context: dict[str, str] | None) -> None:
        self.span = span
        #: What ``NewJob.trace_context`` takes: ``None`` unless a span is active.
        self.context = context

    def enqueued(self, results: Sequence[EnqueueResult]) -> None:
        """Say what was written: the job (one) or the counts (many)."""
        if self.span is None or not self.span.is_recording():
            return
        if len(results) == 1:
            job = results[0].job
            self.span.set_attributes(
                {
                    JOB_ID: job.job_id,
                    QUEUE: job.queue,
                    LANE: job.lane,
                    STATUS: results[0].status,
                }
            )
        else:
            queued = sum(1 for result in results if result.status == "queued")
            self.span.set_attributes({JOB_COUNT: len(results), QUEUED_COUNT: queued})


#: The span of an enqueue while tracing is off.
UNTRACED = EnqueueSpan(None, None)


@contextmanager
def enqueue_span(**attributes: Any) -> Iterator[EnqueueSpan]:
    """Run an enqueue in a span, current for the block; what the block raises is
    recorded on it. Yields ``UNTRACED`` when tracing is off."""
    tracing = active()
    if tracing is None:
        yield UNTRACED
        return
    trace, tracer = tracing
    with tracer.start_as_current_span(
        ENQUEUE_SPAN, kind=trace.SpanKind.PRODUCER, attributes=attributes
    ) as span:
        yield EnqueueSpan(span, _context(span))


def _context(span: Span) -> dict[str, str] | None:
    """The propagators' carrier for ``span``, the current span; ``None`` for an invalid
    one (a provider that makes no spans)."""
    if not span.get_span_context().is_valid:
        return None
    from opentelemetry import propagate

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None
