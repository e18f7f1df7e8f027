"""``async def`` handlers: the coroutine runs in an event loop of its own, in the job's thread.

While it runs, a watcher looks at the job's ``cancel_requested`` flag every
``CANCEL_POLL`` seconds; once the flag is on (a cancellation intent, or the job's timeout)
the task is cancelled, so a handler waiting on I/O stops at its next ``await``. One that
catches ``CancelledError`` and returns is treated as a sync handler that returned after the
flag was set. A coroutine that blocks its loop (no ``await``) is abandoned after the
timeout's grace, like a sync handler.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from .running import RunningJob

#: Seconds between two looks at a running coroutine's ``cancel_requested`` flag.
CANCEL_POLL = 0.05


def run_to_end(value: Any, running: RunningJob) -> Any:
    """``value`` itself, or, if the handler returned an awaitable, what awaiting it gives;
    raises what it raises (``CancelledError`` if the worker cancelled it)."""
    if not inspect.isawaitable(value):
        return value
    return asyncio.run(_watched(value, running))


async def _watched(awaitable: Any, running: RunningJob) -> Any:
    task = asyncio.ensure_future(awaitable)
    while not task.done():
        if running.cancel_requested:
            task.cancel()
            break
        await asyncio.wait({task}, timeout=CANCEL_POLL)
    return await task


def stopped(error: BaseException, running: RunningJob) -> bool:
    """Whether ``error`` is the cancellation the worker gave a coroutine handler."""
    return isinstance(error, asyncio.CancelledError) and running.cancel_requested
