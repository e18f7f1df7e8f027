"""Doubling waits after consecutive failures, reset by a success."""

from __future__ import annotations

#: The first wait after a failure, and the longest, for the worker's database steps.
BACKOFF_START = 0.1
BACKOFF_MAX = 5.0


class Backoff:
    """Doubling waits after consecutive failures (``start`` … ``most`` seconds)."""

    def __init__(self, *, start: float = BACKOFF_START, most: float = BACKOFF_MAX) -> None:
        self.start = start
        self.most = most
        self.delay = 0.0

    def failed(self) -> float:
        self.delay = min(self.most, self.delay * 2 if self.delay else self.start)
        return self.delay

    def succeeded(self) -> None:
        self.delay = 0.0
