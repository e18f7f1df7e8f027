"""Job threads that outlive their jobs, so each keeps its database connection.

A thread per job would open (and on PostgreSQL, prepare statements on) a new connection
for every chain of jobs: several milliseconds of the server's time that an idle worker's
next wake-up then waits behind. Threads here take work as it comes, wait when idle, and
new ones start only when none is idle (e.g. one is stuck in an abandoned handler), so at
most ``concurrency`` plus the stuck ones exist.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any

Work = tuple[Callable[[Any], None], Any]


class JobThreads:
    def __init__(self, *, on_exit: Callable[[], None]) -> None:
        self._lock = threading.Lock()
        self._idle = 0
        self._stopped = False
        self._work: queue.SimpleQueue[Work | None] = queue.SimpleQueue()
        self._on_exit = on_exit  # runs in each thread as it ends (closes its connection)

    def submit(self, function: Callable[[Any], None], argument: Any) -> None:
        """Run ``function(argument)`` on an idle thread, or a new one if none is idle."""
        with self._lock:
            if self._idle:
                self._idle -= 1
                self._work.put((function, argument))
                return
        threading.Thread(
            target=self._serve, args=((function, argument),), name="watchdog-job", daemon=True
        ).start()

    def _serve(self, first: Work) -> None:
        item: Work | None = first
        try:
            while item is not None:
                function, argument = item
                function(argument)
                with self._lock:
                    if self._stopped:
                        return
                    self._idle += 1
                item = self._work.get()
        finally:
            self._on_exit()

    def stop(self) -> None:
        """Let idle threads end; busy ones end when their work is done."""
        with self._lock:
            self._stopped = True
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._work.put(None)
