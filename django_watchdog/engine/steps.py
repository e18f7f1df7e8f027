"""The main loop's steps, run so that no error ends the worker: database errors back off
(and close the connection, so the next step reconnects), anything else is a bug somewhere,
logged with its traceback, and the worker keeps serving other jobs."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError

from . import events
from .backoff import Backoff
from .gate import RecoveryGate
from .ports import EngineStore

logger = logging.getLogger("django_watchdog.worker")


class Steps:
    """Runs main-loop steps for one worker, backing off after consecutive failures. Main
    thread only; a backoff wait ends early when ``stopping`` is set."""

    def __init__(
        self,
        store: EngineStore,
        *,
        worker_id: str,
        gate: RecoveryGate,
        stopping: threading.Event,
    ) -> None:
        self.store = store
        self.worker_id = worker_id
        self.gate = gate
        self.stopping = stopping
        self.backoff = Backoff()

    def run(self, step: Callable[[], Any]) -> Any:
        """Run ``step``; on an error log it, back off (reconnecting), and return 0."""
        name = getattr(step, "__name__", "step")
        try:
            done = step()
        except DatabaseError as error:
            self.gate.failed()
            delay = self.backoff.failed()
            events.log(
                logging.WARNING,
                "store_unavailable",
                worker=self.worker_id,
                step=name,
                error=repr(error),
                retry_in_s=delay,
            )
            self.store.release_connection()
        except Exception as error:  # noqa: BLE001 - log and back off; never crash-loop
            delay = self.backoff.failed()
            events.log(
                logging.ERROR,
                "step_failed",
                worker=self.worker_id,
                step=name,
                error=repr(error),
                retry_in_s=delay,
            )
            logger.exception("worker step %s failed", name)
        else:
            self.gate.succeeded()
            return done
        self.stopping.wait(delay)
        return 0
