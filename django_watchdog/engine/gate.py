"""When a worker may judge other workers by their heartbeats.

Another worker's heartbeat falls silent when that worker is gone, but also when the database
did not take it: an outage (connections refused, backends terminated), or on SQLite a lock
held past the timeout. Right after such an outage every heartbeat is old, live workers'
included, and whoever reconnects first must not take their jobs.

A worker tells the two apart by its own heartbeats. It judges others only while its own
have gone through for a whole ``timeout``, each within ``stall`` seconds of the previous one,
with no database failure seen in between (by any of its threads). Then the database took
writes all along the window in which the other worker fell silent, so that silence is the
other worker's own. ``stall`` must leave room for the other's heartbeat period:
``stall + period < timeout`` (the worker uses ``timeout / 2`` and ``timeout / 4``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .clock import Clock


class RecoveryGate:
    """Open while this worker's own heartbeats have been healthy for a full timeout.

    Invariant: ``open_since()`` returns ``t`` only if own heartbeats committed at least every
    ``stall`` seconds from ``t`` until now, ``now - t >= timeout``, and no database failure
    was reported since ``t``. Thread-safe: the heartbeat, main and job threads report to it.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        timeout: float,
        stall: float,
        on_reconnect: Callable[[], None] = lambda: None,
    ) -> None:
        self.clock = clock
        self.timeout = timeout
        self.stall = stall
        self._on_reconnect = on_reconnect
        self._lock = threading.Lock()
        self._since: float | None = None  # the first heartbeat of the current healthy run
        self._last_beat: float | None = None
        self._lost = False  # a database failure was seen since the last heartbeat

    def failed(self) -> None:
        """A database call failed: close the gate until heartbeats have gone through again
        for a full timeout."""
        with self._lock:
            self._since = None
            self._lost = True

    def succeeded(self) -> None:
        """A database call worked: after a failure, have the heartbeat go out at once."""
        with self._lock:
            lost = self._lost
        if lost:
            self._on_reconnect()

    def beat(self) -> None:
        """This worker's heartbeat was just committed."""
        now = self.clock.monotonic()
        with self._lock:
            late = self._last_beat is None or now - self._last_beat > self.stall
            if self._since is None or late:
                self._since = now  # a new run: the database held our writes back until now
            self._last_beat = now
            self._lost = False

    def open_since(self) -> float | None:
        """Start of the current healthy run if the gate is open now; ``None`` if closed."""
        now = self.clock.monotonic()
        with self._lock:
            if self._since is None or self._last_beat is None:
                return None
            if now - self._last_beat > self.stall or now - self._since < self.timeout:
                return None
            return self._since

    def still_open(self, since: float) -> bool:
        """Whether the gate is open now in the same healthy run that ``since`` began."""
        return self.open_since() == since
