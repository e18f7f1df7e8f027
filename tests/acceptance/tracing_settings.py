"""A worker with tracing on: OpenTelemetry's SDK writes each ended span as one JSON line
to the file ``WATCHDOG_TEST_SPANS`` names (set up where a project would: its settings)."""

import os

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

from tests.settings import *  # noqa: F403

_provider = TracerProvider()
_provider.add_span_processor(
    SimpleSpanProcessor(
        ConsoleSpanExporter(
            out=open(os.environ["WATCHDOG_TEST_SPANS"], "a"),  # open while the worker runs
            formatter=lambda span: span.to_json(indent=None) + "\n",
        )
    )
)
trace.set_tracer_provider(_provider)
