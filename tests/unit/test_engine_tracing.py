"""The worker's runs as OpenTelemetry spans (SDK, in-memory exporter), single and batch
execution, sync and ``async def`` handlers: each run is a child of the context stored with
its job, current while its handler runs, and says how it ended."""

import asyncio

import pytest
from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, StatusCode

from .test_engine import FakeStore, fake_job, make_worker


def handle(job):
    with trace.get_tracer("tests").start_as_current_span(f"inside {job.job_id}"):
        if job.payload == "fail":
            raise KeyError("missing")
        return "ok"


async def handle_async(job):
    await asyncio.sleep(0)
    with trace.get_tracer("tests").start_as_current_span(f"inside {job.job_id}"):
        return "ok"


@pytest.mark.parametrize("batch", [1, 3])
def test_each_run_continues_its_jobs_trace_and_ends_with_its_outcome(spans, batch):
    with spans.tracer.start_as_current_span("request") as request:
        carrier = {}
        propagate.inject(carrier)
    jobs = [
        fake_job("a", payload="ok"),
        fake_job("b", payload="fail"),
        fake_job("c", lane="async"),
        fake_job("d"),  # enqueued outside any span
    ]
    for job in jobs[:3]:
        job.trace_context = carrier
    worker = make_worker(FakeStore(jobs), {"l": handle, "async": handle_async}, batch=batch)
    worker.clock.advance(0)
    while worker.run_once():
        pass

    runs = {s.attributes["watchdog.job_id"]: s for s in spans.named("watchdog.run")}
    assert {job_id: s.attributes["watchdog.outcome"] for job_id, s in runs.items()} == {
        "a": "completed",
        "b": "failed",
        "c": "completed",
        "d": "completed",
    }
    request_context = request.get_span_context()
    for job_id in "abc":
        assert runs[job_id].kind == SpanKind.CONSUMER
        assert runs[job_id].context.trace_id == request_context.trace_id
        assert runs[job_id].parent.span_id == request_context.span_id
    assert runs["d"].parent is None
    for job_id, run in runs.items():
        inside = spans.one(f"inside {job_id}")
        assert inside.parent.span_id == run.context.span_id, "the handler's span is a child"
        assert (run.attributes["watchdog.worker_id"], run.attributes["watchdog.attempt"]) == (
            "w1",
            1,
        )
    assert runs["b"].status.status_code == StatusCode.ERROR
    assert [e.attributes["exception.type"] for e in runs["b"].events] == ["KeyError"]
    assert runs["a"].status.status_code == StatusCode.UNSET
    assert trace.get_current_span() is trace.INVALID_SPAN, "no span is left current"
