"""OpenTelemetry spans for job runs (the ``opentelemetry`` extra); nothing without it.

Tracing is on once the process has set up a tracer provider (an SDK's). Until then no span
can be recorded, so watchdog does nothing; it never imports OpenTelemetry itself, so a
project without it pays no import and no call.

A run's span, ``watchdog.run`` (kind ``CONSUMER``), continues the trace its job was
enqueued in: its parent is the context stored with the job (``Job.trace_context``, written
by ``django_watchdog.tracing``), so a trace follows a request into its jobs. It starts
before ``job_started``, is current while the handler runs (the handler's own spans are its
children, an ``async def`` handler's too), records what the handler raised, and ends once
the job's settle is written, with the outcome stored.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

    from .running import RunningJob

#: The instrumentation scope of every watchdog span.
TRACER_NAME = "django_watchdog"
RUN_SPAN = "watchdog.run"

#: Span attributes (the same names on enqueue spans, where they apply).
JOB_ID = "watchdog.job_id"
QUEUE = "watchdog.queue"
LANE = "watchdog.lane"
ATTEMPT = "watchdog.attempt"
OUTCOME = "watchdog.outcome"
WORKER_ID = "watchdog.worker_id"

#: Outcomes (``retrying``: this attempt failed, another follows) whose span is an error.
FAILED_OUTCOMES = frozenset({"failed", "retrying", "outcome_unknown"})

#: The tracer of the provider last asked, with that provider (a process sets one).
_tracer: tuple[Any, Tracer] | None = None


def active() -> tuple[Any, Tracer] | None:
    """OpenTelemetry's ``trace`` module and watchdog's tracer, if this process imported
    OpenTelemetry and set up a tracer provider; ``None`` otherwise (tracing is off)."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None  # none set up: every span would be a no-op
    return trace, _tracer_of(provider)


def _tracer_of(provider: Any) -> Tracer:
    global _tracer
    cached = _tracer
    if cached is not None and cached[0] is provider:
        return cached[1]
    found: Tracer = provider.get_tracer(TRACER_NAME, _version())
    _tracer = (provider, found)
    return found


def _version() -> str | None:
    try:
        return metadata.version("django-watchdog")
    except metadata.PackageNotFoundError:  # run from a source tree
        return None


def stored_parent(carrier: object) -> Context | None:
    """The context a job was enqueued in, from its stored carrier; ``None`` for none (or
    for anything that is not a carrier: a hand-edited value is ignored, never fatal)."""
    if not isinstance(carrier, Mapping) or not carrier:
        return None
    text = {k: v for k, v in carrier.items() if isinstance(k, str) and isinstance(v, str)}
    if not text:
        return None
    from opentelemetry import propagate

    return propagate.extract(text)


def start_run(running: RunningJob) -> Span | None:
    """Start ``running``'s span, a child of its job's stored context; ``None`` when
    tracing is off."""
    tracing = active()
    if tracing is None:
        return None
    trace, tracer = tracing
    return tracer.start_span(
        RUN_SPAN,
        context=stored_parent(running.model.trace_context),
        kind=trace.SpanKind.CONSUMER,
        attributes={
            JOB_ID: running.job_id,
            QUEUE: running.queue,
            LANE: running.lane,
            ATTEMPT: running.attempts,
            WORKER_ID: running.worker_id,
        },
    )


@contextmanager
def current(span: Span | None) -> Iterator[None]:
    """Make ``span`` the current span in this thread for the block (nothing if ``None``);
    what the block raises passes through unrecorded: ``end_run`` records the handler's."""
    if span is None:
        yield
        return
    from opentelemetry import trace

    with trace.use_span(span, record_exception=False, set_status_on_exception=False):
        yield


def end_run(span: Span | None, outcome: str | None, error: BaseException | None) -> None:
    """End a run's span: the outcome stored (none if the settle was refused), what the
    handler raised, and an error status for a failure."""
    if span is None:
        return
    if outcome is not None:
        span.set_attribute(OUTCOME, outcome)
    if error is not None:
        span.record_exception(error)
    if outcome in FAILED_OUTCOMES:
        from opentelemetry.trace import Status, StatusCode

        described = f"{type(error).__name__}: {error}" if error is not None else outcome
        span.set_status(Status(StatusCode.ERROR, described))
    span.end()
