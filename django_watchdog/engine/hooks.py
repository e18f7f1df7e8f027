"""A run's start and end: ``job_started`` and ``job_finished``, and the run's span.

The signals are sent robustly: a receiver that raises is logged (``event=receiver_failed``,
with its traceback) and the worker goes on; the job's outcome is already decided
(``job_started``: the handler still runs) or written (``job_finished``). Both are sent
outside the store's transactions, before the handler runs and after the settle's
transaction ended, with the run's span current (engine/tracing.py), which starts before
the first and ends after the second.
"""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import Signal

from ..signals import job_finished, job_started
from . import events, tracing
from .running import RunningJob


def started(running: RunningJob, handler: Any) -> None:
    """The worker is about to call ``handler`` for ``running``."""
    running.handler = handler
    running.span = tracing.start_run(running)
    with tracing.current(running.span):
        _send(job_started, running, sender=handler, job=running, worker_id=running.worker_id)


def finished(running: RunningJob, outcome: str | None, duration: float) -> None:
    """``running``'s settle ended; only for runs that started."""
    if running.handler is None:
        return
    with tracing.current(running.span):
        _send(
            job_finished,
            running,
            sender=running.handler,
            job=running,
            worker_id=running.worker_id,
            outcome=outcome,
            duration=duration,
            exception=running.error,
        )
    tracing.end_run(running.span, outcome, running.error)


def _send(signal: Signal, running: RunningJob, *, sender: Any, **named: Any) -> None:
    if not signal.has_listeners(sender):
        return
    name = "job_started" if signal is job_started else "job_finished"
    for receiver, answer in signal.send_robust(sender, **named):
        if isinstance(answer, Exception):
            events.log(
                logging.ERROR,
                "receiver_failed",
                **events.job(running),
                signal=name,
                receiver=getattr(receiver, "__qualname__", repr(receiver)),
                error=f"{type(answer).__name__}: {answer}",
                exc_info=answer,
            )
