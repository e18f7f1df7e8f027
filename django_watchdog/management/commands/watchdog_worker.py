"""``manage.py watchdog_worker``: parse arguments, build the engine, install signals, run."""

from __future__ import annotations

import logging
import os
import sys
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections

from ... import supported_databases
from ...domain import validation
from ...domain.errors import InvalidInput
from ...engine.clock import SystemClock
from ...engine.housekeeping import Housekeeping
from ...engine.stopping import stop_on_signals
from ...engine.worker import WatchdogWorker, WorkerOptions
from ...handlers import registered, registered_options
from ...schedules import configured
from ...store.batches import BATCH_MAX
from ...store.sessions import configure_worker_connections
from ...store.worker_store import WorkerStore

if TYPE_CHECKING:
    from ...prometheus.worker import WorkerMetrics


class Command(BaseCommand):
    help = (
        "Run a watchdog worker: claim ready jobs of the lanes it serves, run their handlers "
        "(up to --concurrency at once) and settle them. Stops cleanly on SIGTERM/SIGINT: no new "
        "claims, running jobs get the shutdown grace to finish; a second signal exits at once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--lane",
            action="append",
            default=[],
            metavar="LANE",
            help="Serve only this lane (repeatable). Default: every lane with a handler.",
        )
        parser.add_argument(
            "--exclude-lane",
            action="append",
            default=[],
            metavar="LANE",
            help="Never serve this lane (repeatable).",
        )
        parser.add_argument(
            "--concurrency",
            type=int,
            default=1,
            metavar="N",
            help="Jobs run at once in this process, one thread each (default 1).",
        )
        parser.add_argument(
            "--batch",
            type=int,
            default=None,
            metavar="N",
            help=(
                "Jobs each thread claims at once and runs one after another, writing their "
                "results with its next claim: fewer transactions per job, for many short jobs "
                "(default WATCHDOG['BATCH'], 1). A claimed job waits for those before it; if "
                "the worker dies, all its claimed jobs count as interrupted runs."
            ),
        )
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Exit 0 once no ready work remains (scripts, tests, benchmarks).",
        )
        parser.add_argument(
            "--worker-id",
            default=None,
            metavar="ID",
            help="Name of this worker in the Worker table (default host-pid-random).",
        )
        parser.add_argument(
            "--poll-interval",
            type=float,
            default=None,
            metavar="SECONDS",
            help="Longest idle wait between polls (default WATCHDOG['POLL_INTERVAL']).",
        )
        parser.add_argument(
            "--shutdown-grace",
            type=float,
            default=None,
            metavar="SECONDS",
            help="Time running jobs get after SIGTERM (default WATCHDOG['SHUTDOWN_GRACE']).",
        )
        parser.add_argument(
            "--database",
            default=DEFAULT_DB_ALIAS,
            help="Database alias holding the watchdog tables (default 'default').",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=None,
            metavar="PORT",
            help=(
                "Serve this process's Prometheus metrics (handler run times) on PORT "
                "(0: any free port); needs the prometheus extra."
            ),
        )
        parser.add_argument(
            "--metrics-address",
            default="0.0.0.0",  # noqa: S104 - Prometheus scrapes from another host
            metavar="ADDRESS",
            help="Address the metrics endpoint listens on (default 0.0.0.0).",
        )
        parser.add_argument(
            "--metrics-database",
            action="store_true",
            help="Also serve the database figures (backlog, live workers) on --metrics-port.",
        )
        parser.add_argument(
            "--log-level",
            default="INFO",
            choices=["DEBUG", "INFO", "WARNING", "ERROR"],
            help="Level of the django_watchdog loggers; DEBUG logs every claim and settle.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            lanes = validation.lanes(options["lane"], "--lane")
            excluded = validation.lanes(options["exclude_lane"], "--exclude-lane")
            concurrency = validation.integer(
                options["concurrency"], "--concurrency", minimum=1, maximum=256
            )
            batch = options["batch"]
            if batch is not None:
                batch = validation.integer(batch, "--batch", minimum=1, maximum=BATCH_MAX)
            poll_interval, shutdown_grace = (
                None if options[name] is None else validation.interval(options[name], option)
                for name, option in (
                    ("poll_interval", "--poll-interval"),
                    ("shutdown_grace", "--shutdown-grace"),
                )
            )
            worker_id = options["worker_id"]
            if worker_id is not None:
                worker_id = validation.identifier(worker_id, "--worker-id")[:64]
        except InvalidInput as error:
            raise CommandError(str(error)) from error
        using = options["database"]
        if using not in connections:
            raise CommandError(f"--database: {using!r} is not a configured database alias")
        problem = supported_databases.refusal(using, connect=True)
        if problem is not None:
            raise CommandError(problem)
        if connections[using].in_atomic_block:
            # Its job threads (own connections) would wait forever for this transaction's
            # locks, or never see its uncommitted jobs.
            raise CommandError(
                f"watchdog_worker cannot run inside an open transaction on database {using!r} "
                "(a django.test.TestCase runs each test in one). In a test, run the jobs "
                "inline with django_watchdog.testing.run_jobs(), or use TransactionTestCase."
            )
        self._configure_logging(options["log_level"])

        handlers = registered()
        extra = {"worker_id": worker_id} if worker_id else {}
        clock = SystemClock()
        store = WorkerStore(using)
        worker = WatchdogWorker(
            WorkerOptions(
                lanes=lanes,
                exclude_lanes=excluded,
                concurrency=concurrency,
                batch=batch,
                burst=options["burst"],
                poll_interval=poll_interval,
                shutdown_grace=shutdown_grace,
                **extra,
            ),
            handlers=handlers,
            lane_options=registered_options(),
            housekeeping=Housekeeping(store, clock, schedules=configured()),
            using=using,
            store=store,
            clock=clock,
        )
        if not worker.lanes:
            raise CommandError(
                "no handler serves the requested lanes; register one with "
                "@django_watchdog.handler('lane') in <app>/jobs.py "
                f"(registered: {', '.join(sorted(handlers)) or 'none'})"
            )
        metrics = None
        if options["metrics_port"] is not None:
            metrics = self._serve_metrics(using, options)
        self._banner(worker, using)
        if metrics is not None:
            self.stdout.write(f"  metrics:     http://{metrics.address}:{metrics.port}/metrics")
            self.stdout.flush()
        configure_worker_connections(using)
        try:
            with stop_on_signals(worker):
                code = worker.run()
        finally:
            if metrics is not None:
                metrics.close()
        sys.stdout.flush()
        if worker.abandoned:
            # Job threads that outlived the grace period would keep the process alive.
            logging.shutdown()
            os._exit(code)

    def _serve_metrics(self, using: str, options: dict[str, Any]) -> WorkerMetrics:
        """Start the metrics endpoint, measuring this process's runs."""
        try:
            port = validation.integer(
                options["metrics_port"], "--metrics-port", minimum=0, maximum=65535
            )
        except InvalidInput as error:
            raise CommandError(str(error)) from error
        try:
            from ...prometheus import worker as worker_metrics

            return worker_metrics.serve(
                port=port,
                address=options["metrics_address"],
                using=using,
                database=options["metrics_database"],
            )
        except (ImproperlyConfigured, OSError) as error:
            raise CommandError(f"--metrics-port: {error}") from error

    def _banner(self, worker: WatchdogWorker, using: str) -> None:
        connection = connections[using]
        excluded = worker.options.exclude_lanes
        handlers = ", ".join(
            f"{lane}={getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
            for lane, fn in sorted(worker.handlers.items())
        )
        lines = [
            f"watchdog worker {worker.worker_id} (pid {os.getpid()})",
            f"  database:    {using} ({connection.vendor} {connection.settings_dict.get('NAME')})",
            f"  lanes:       {', '.join(worker.lanes)}"
            + (f" (excluding {', '.join(excluded)})" if excluded else ""),
            f"  handlers:    {handlers}",
            f"  concurrency: {worker.options.concurrency}  batch: {worker.batch_size}"
            + ("  (burst)" if worker.options.burst else ""),
        ]
        self.stdout.write("\n".join(lines))
        self.stdout.flush()

    def _configure_logging(self, level: str) -> None:
        logger = logging.getLogger("django_watchdog")
        logger.setLevel(level)
        if not logger.handlers and not logging.getLogger().handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(
                logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s")
            )
            logger.addHandler(handler)
