"""How one worker process runs: its lanes, concurrency, batch size and timings."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass, field

from ..conf import seconds, setting
from ..store.batches import BATCH_MAX


def default_worker_id() -> str:
    return f"{socket.gethostname()[:40]}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass(frozen=True, kw_only=True)
class WorkerOptions:
    """How one worker process runs; ``None`` timings come from the ``WATCHDOG`` setting,
    read when used (so ``override_settings`` reaches a running worker)."""

    lanes: tuple[str, ...] = ()
    exclude_lanes: tuple[str, ...] = ()
    concurrency: int = 1
    #: Jobs a job thread claims (and settles) at once; ``None``: ``WATCHDOG['BATCH']``.
    batch: int | None = None
    burst: bool = False
    worker_id: str = field(default_factory=default_worker_id)
    poll_interval: float | None = None
    heartbeat_interval: float | None = None
    worker_timeout: float | None = None
    shutdown_grace: float | None = None
    timeout_grace: float | None = None

    def timing(self, name: str) -> float:
        value = getattr(self, name)
        return seconds(name.upper()) if value is None else float(value)

    def batch_size(self) -> int:
        value = setting("BATCH") if self.batch is None else self.batch
        return max(1, min(BATCH_MAX, int(value)))

    def serves(self, lane: str) -> bool:
        """Whether ``--lane``/``--exclude-lane`` let this worker serve ``lane``."""
        return (not self.lanes or lane in self.lanes) and lane not in self.exclude_lanes
