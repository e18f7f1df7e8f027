"""OpenTelemetry's SDK for the tracing tests: a tracer provider whose spans an in-memory
exporter keeps, set as the global one for one test and removed after it (the API lets a
process set it once; OpenTelemetry's own test utilities reset it the same way)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once


def _install(provider: trace.TracerProvider | None) -> None:
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    if provider is not None:
        trace.set_tracer_provider(provider)


class Spans:
    """The spans ended so far, and a tracer for the test's own (a "request")."""

    def __init__(self, exporter: InMemorySpanExporter, provider: TracerProvider) -> None:
        self.exporter = exporter
        self.tracer = provider.get_tracer("tests")

    def named(self, name: str) -> list:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]

    def one(self, name: str):
        (span,) = self.named(name)
        return span


@contextmanager
def tracing_on() -> Iterator[Spans]:
    """Tracing on for the block (the ``spans`` fixture: the test): every span ended is
    kept in memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _install(provider)
    try:
        yield Spans(exporter, provider)
    finally:
        _install(None)
        provider.shutdown()
