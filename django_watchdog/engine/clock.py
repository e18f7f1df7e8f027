"""Time as the engine sees it; tests inject a clock they can move."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Protocol

from django.utils import timezone


class Clock(Protocol):
    def now(self) -> datetime:
        """The current aware datetime (heartbeats and recovery cut-offs)."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (intervals and durations)."""


class SystemClock:
    def now(self) -> datetime:
        return timezone.now()

    def monotonic(self) -> float:
        return time.monotonic()
