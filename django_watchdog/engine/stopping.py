"""SIGTERM and SIGINT reach a worker at once, even one asleep for a long poll interval.

Python runs a signal handler in the main thread between two bytecodes of whatever it
interrupted; setting the worker's wake event there could deadlock on a lock that code
holds. So the Python handler does nothing: the interpreter's own C handler writes the
signal's number to a pipe (``signal.set_wakeup_fd``), and a relay thread, outside any
signal context, asks the worker to stop and wakes its main loop. A second signal exits at
once.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .worker import WatchdogWorker

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)

logger = logging.getLogger("django_watchdog.worker")


@contextmanager
def stop_on_signals(worker: WatchdogWorker) -> Iterator[None]:
    """While the block runs (in the main thread), SIGTERM/SIGINT stop ``worker``."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous = {signum: signal.signal(signum, _noted_by_the_relay) for signum in STOP_SIGNALS}
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    relay = threading.Thread(
        target=_relay, args=(read_fd, worker), name="watchdog-signals", daemon=True
    )
    relay.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous_fd)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        os.close(write_fd)  # the relay reads end-of-file and returns
        relay.join(timeout=1)
        os.close(read_fd)


def _noted_by_the_relay(signum: int, frame: FrameType | None) -> None:
    """Installed so the interpreter catches the signal and writes it to the wakeup pipe."""


def _relay(read_fd: int, worker: WatchdogWorker) -> None:
    while True:
        try:
            received = os.read(read_fd, 64)
        except OSError:
            return
        if not received:
            return
        for signum in received:
            if signum in STOP_SIGNALS:
                _stop(worker, signal.Signals(signum))


def _stop(worker: WatchdogWorker, signum: signal.Signals) -> None:
    """Act on the signal first, then say so: a message that cannot be written (stderr a
    closed pipe) must not stop the signal from stopping the worker."""
    if worker.stop_requested:
        _say(f"second signal: exiting at once ({signum.name})", signum, "exit_now")
        os._exit(128 + signum)
    worker.request_stop()
    # Safe here (a thread, not a signal handler): stop claiming, wake the main loop, and
    # end a backoff it is sleeping through (an outage, a SQLite write lock held elsewhere).
    worker.stop()
    _say(f"{signum.name}: finishing running jobs", signum, "stop_requested")


def _say(message: str, signum: signal.Signals, event: str) -> None:
    """Log the worker's answer to a signal (``event`` and ``signal`` as ``extra``); never
    raise: logging reports a stream it cannot write to and goes on."""
    try:
        logger.warning(message, extra={"event": event, "signal": signum.name})
    except Exception:  # noqa: BLE001, S110 - a message lost must not keep the worker alive
        pass
