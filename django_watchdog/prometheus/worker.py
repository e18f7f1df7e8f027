"""A worker process's own metrics endpoint (``watchdog_worker --metrics-port``)."""

from __future__ import annotations

from dataclasses import dataclass
from http.server import HTTPServer

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

from .collector import DatabaseCollector
from .run_times import RunTimes


@dataclass(frozen=True, kw_only=True)
class WorkerMetrics:
    """Where the endpoint listens, and what it serves; ``close()`` stops both."""

    registry: CollectorRegistry
    address: str
    port: int
    run_times: RunTimes
    server: HTTPServer

    def close(self) -> None:
        """Stop measuring runs and serving."""
        self.run_times.disconnect()
        self.server.shutdown()
        self.server.server_close()


def serve(*, port: int, address: str, using: str, database: bool) -> WorkerMetrics:
    """Start serving this process's metrics on ``address:port`` (0: any free port) in a
    daemon thread, measuring the runs of this process's workers (``RunTimes``); with
    ``database`` the database figures too. Raises ``OSError`` if the port cannot be bound."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    run_times = RunTimes(registry)
    if database:
        registry.register(DatabaseCollector(using, close_connection=True))
    server, _thread = start_http_server(port, addr=address, registry=registry)
    run_times.connect()
    return WorkerMetrics(
        registry=registry,
        address=address,
        port=server.server_port,
        run_times=run_times,
        server=server,
    )
