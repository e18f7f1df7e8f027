"""Handlers (lanes ``traced-*``) that make spans of their own, for the tracing tests; the
worker's acceptance test imports them through ``tests.acceptance.tracing_settings``."""

import asyncio

from opentelemetry import trace

from django_watchdog import RetryPolicy, handler


def tracer():
    """From the provider set now (each tracing test sets its own)."""
    return trace.get_tracer_provider().get_tracer("tests.handlers")


@handler("traced")
def traced(job):
    with tracer().start_as_current_span("inside the handler"):
        if job.payload == "fail":
            raise ValueError(f"no mail server for {job.job_id}")
        return job.payload


@handler("traced-async")
async def traced_async(job):
    await asyncio.sleep(0)
    with tracer().start_as_current_span("inside the async handler"):
        await asyncio.sleep(0)
        return job.payload


@handler("traced-flaky", retry=RetryPolicy(max_attempts=2, backoff=0.01, jitter=0))
def traced_flaky(job):
    if job.attempts < 2:
        raise ConnectionError(f"attempt {job.attempts}")
    return job.attempts
