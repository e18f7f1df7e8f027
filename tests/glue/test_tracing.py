"""Tracing with OpenTelemetry's SDK (its in-memory exporter): an enqueue inside a
"request" span stores the trace context with its job, and the job's run, inline or by
the worker's engine, is a span of that same trace."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test import TestCase
from django.test.utils import CaptureQueriesContext
from opentelemetry.trace import SpanKind, StatusCode

import django_watchdog as watchdog
from django_watchdog.backend import enqueue_task
from django_watchdog.models import Job
from django_watchdog.testing import run_jobs
from django_watchdog.testing.runner import INLINE_WORKER
from tests.spans import Spans, tracing_on
from tests.tasks_app import tasks
from tests.testapp import traced_handlers  # noqa: F401 - registers the traced-* lanes


class WithSpans(TestCase):
    @pytest.fixture(autouse=True)
    def _spans(self, spans):
        self.spans: Spans = spans

    def request(self, name="GET /signup"):
        """A span standing for the request that enqueues."""
        return self.spans.tracer.start_as_current_span(name, kind=SpanKind.SERVER)


class EnqueueSpans(WithSpans):
    def test_enqueue_inside_a_request_stores_its_trace_context_and_makes_a_child_span(self):
        with self.request() as request:
            result = watchdog.enqueue("mail:1", queue="user:1", lane="traced", payload="hi")

        span = self.spans.one("watchdog.enqueue")
        self.assertEqual(span.kind, SpanKind.PRODUCER)
        self.assertEqual(span.parent.span_id, request.get_span_context().span_id)
        self.assertEqual(
            dict(span.attributes),
            {
                "watchdog.job_id": "mail:1",
                "watchdog.queue": "user:1",
                "watchdog.lane": "traced",
                "watchdog.status": "queued",
            },
        )
        stored = Job.objects.get(job_id="mail:1").trace_context
        self.assertEqual(result.job.trace_context, stored)
        trace_id = f"{span.context.trace_id:032x}"
        # version 00, then the trace and the enqueue span; flags (sampled) follow.
        self.assertTrue(
            stored["traceparent"].startswith(f"00-{trace_id}-{span.context.span_id:016x}-")
        )

    def test_a_duplicate_says_so_and_keeps_the_first_context(self):
        with self.request("first"):
            watchdog.enqueue("mail:1", queue="user:1", lane="traced")
        first = Job.objects.get(job_id="mail:1").trace_context
        with self.request("second"):
            result = watchdog.enqueue("mail:1", queue="user:1", lane="traced")
        self.assertEqual(result.status, "duplicate")
        self.assertEqual(
            self.spans.named("watchdog.enqueue")[-1].attributes["watchdog.status"], "duplicate"
        )
        self.assertEqual(Job.objects.get(job_id="mail:1").trace_context, first)

    def test_enqueue_many_is_one_span_and_every_job_carries_its_context(self):
        with self.request():
            watchdog.enqueue_many(
                [{"job_id": f"mail:{n}", "queue": f"user:{n}", "lane": "traced"} for n in range(3)]
            )
        span = self.spans.one("watchdog.enqueue")
        self.assertEqual(
            (span.attributes["watchdog.job_count"], span.attributes["watchdog.queued_count"]),
            (3, 3),
        )
        contexts = {str(job.trace_context) for job in Job.objects.all()}
        self.assertEqual(len(contexts), 1)
        self.assertIn(f"{span.context.span_id:016x}", contexts.pop())

    def test_a_refused_enqueue_records_the_error_on_its_span(self):
        with self.request(), self.assertRaises(watchdog.InvalidInput):
            watchdog.enqueue("mail:1", queue="", lane="traced")
        span = self.spans.one("watchdog.enqueue")
        self.assertEqual(span.status.status_code, StatusCode.ERROR)
        self.assertEqual([e.name for e in span.events], ["exception"])
        self.assertFalse(Job.objects.exists())

    def test_aenqueue_from_async_code_keeps_the_request_context(self):
        async def view():
            with self.request() as request:
                await watchdog.aenqueue("mail:1", queue="user:1", lane="traced")
            return request

        request = async_to_sync(view)()
        span = self.spans.one("watchdog.enqueue")
        self.assertEqual(span.context.trace_id, request.get_span_context().trace_id)
        self.assertIn(
            f"{span.context.span_id:016x}", Job.objects.get().trace_context["traceparent"]
        )

    def test_the_task_backends_enqueue_makes_a_span_and_stores_the_context(self):
        with self.request() as request:
            result = enqueue_task(tasks.add, (1, 2))
        span = self.spans.one("watchdog.enqueue")
        self.assertEqual(span.context.trace_id, request.get_span_context().trace_id)
        self.assertEqual(span.attributes["watchdog.task"], tasks.add.module_path)
        self.assertEqual(span.attributes["watchdog.job_id"], result.id)
        stored = Job.objects.get(job_id=result.id).trace_context
        self.assertIn(f"{span.context.span_id:016x}", stored["traceparent"])


class RunSpansInline(WithSpans):
    def run_in_request(self, *jobs):
        with self.request() as request:
            for job_id, lane, payload in jobs:
                watchdog.enqueue(job_id, queue=job_id, lane=lane, payload=payload)
        return request, self.spans.named("watchdog.enqueue")

    def test_a_run_continues_the_trace_of_the_request_that_enqueued_it(self):
        request, (enqueued,) = self.run_in_request(("mail:1", "traced", "hi"))
        (run,) = run_jobs()
        self.assertEqual(run.outcome, "completed")

        span = self.spans.one("watchdog.run")
        self.assertEqual(span.kind, SpanKind.CONSUMER)
        self.assertEqual(span.context.trace_id, request.get_span_context().trace_id)
        self.assertEqual(span.parent.span_id, enqueued.context.span_id)
        self.assertEqual(
            dict(span.attributes),
            {
                "watchdog.job_id": "mail:1",
                "watchdog.queue": "mail:1",
                "watchdog.lane": "traced",
                "watchdog.attempt": 1,
                "watchdog.worker_id": INLINE_WORKER,
                "watchdog.outcome": "completed",
            },
        )
        inside = self.spans.one("inside the handler")
        self.assertEqual(inside.parent.span_id, span.context.span_id)

    def test_an_async_handlers_spans_are_children_of_its_run(self):
        self.run_in_request(("hello:1", "traced-async", "hi"))
        run_jobs()
        run = self.spans.one("watchdog.run")
        inside = self.spans.one("inside the async handler")
        self.assertEqual(inside.parent.span_id, run.context.span_id)

    def test_a_failure_is_recorded_with_its_exception_and_an_error_status(self):
        self.run_in_request(("mail:1", "traced", "fail"))
        (run,) = run_jobs()
        self.assertEqual(run.outcome, "failed")
        span = self.spans.one("watchdog.run")
        self.assertEqual(span.attributes["watchdog.outcome"], "failed")
        self.assertEqual(span.status.status_code, StatusCode.ERROR)
        self.assertEqual(span.status.description, "ValueError: no mail server for mail:1")
        (event,) = span.events
        self.assertEqual(
            (event.name, event.attributes["exception.type"]), ("exception", "ValueError")
        )

    def test_each_attempt_is_a_span_of_the_same_trace(self):
        request, _ = self.run_in_request(("flaky:1", "traced-flaky", None))
        run_jobs()
        first, second = self.spans.named("watchdog.run")
        self.assertEqual(
            [
                (s.attributes["watchdog.attempt"], s.attributes["watchdog.outcome"])
                for s in (first, second)
            ],
            [(1, "retrying"), (2, "completed")],
        )
        self.assertEqual(
            {first.context.trace_id, second.context.trace_id}, {request.get_span_context().trace_id}
        )

    def test_a_job_enqueued_outside_any_span_runs_in_a_trace_of_its_own(self):
        watchdog.enqueue("mail:1", queue="user:1", lane="traced")
        enqueued = self.spans.one("watchdog.enqueue")
        self.assertIsNone(enqueued.parent)
        run_jobs()
        self.assertEqual(self.spans.one("watchdog.run").parent.span_id, enqueued.context.span_id)

    def test_a_trace_context_edited_into_nonsense_is_ignored(self):
        watchdog.enqueue("mail:1", queue="user:1", lane="traced", payload="hi")
        Job.objects.filter(job_id="mail:1").update(trace_context=["not", "a", "carrier"])
        (run,) = run_jobs()
        self.assertEqual(run.outcome, "completed")
        self.assertIsNone(self.spans.one("watchdog.run").parent)


@pytest.mark.django_db
def test_with_tracing_off_nothing_is_stored_and_enqueue_runs_the_same_statements():
    """Off: no tracer provider (the API imported, no SDK set up)."""
    with CaptureQueriesContext(connection) as untraced:
        watchdog.enqueue("mail:1", queue="user:1", lane="traced")
    assert Job.objects.get(job_id="mail:1").trace_context is None
    assert run_jobs()[0].outcome == "completed"

    with tracing_on() as spans, spans.tracer.start_as_current_span("request"):
        with CaptureQueriesContext(connection) as traced:
            watchdog.enqueue("mail:2", queue="user:2", lane="traced")
    assert Job.objects.get(job_id="mail:2").trace_context is not None
    assert len(traced) == len(untraced)
