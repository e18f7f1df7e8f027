"""A worker process's own metrics endpoint (``watchdog_worker --metrics-port``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

from ..handlers import HandlerFunction
from .collector import DatabaseCollector
from .run_times import RunTimes


@dataclass(frozen=True, kw_only=True)
class WorkerMetrics:
    """The measured handlers to run, and where the endpoint listens."""

    handlers: dict[str, HandlerFunction]
    address: str
    port: int


def serve(
    handlers: Mapping[str, HandlerFunction],
    *,
    port: int,
    address: str,
    using: str,
    database: bool,
) -> WorkerMetrics:
    """Start serving this process's metrics on ``address:port`` (0: any free port) in a
    daemon thread; with ``database`` the database figures too. Raises ``OSError`` if the
    port cannot be bound."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    run_times = RunTimes(registry)
    if database:
        registry.register(DatabaseCollector(using, close_connection=True))
    server, _thread = start_http_server(port, addr=address, registry=registry)
    return WorkerMetrics(
        handlers=run_times.wrap_all(handlers), address=address, port=server.server_port
    )
