"""The store as the worker engine uses it: every lock wait bounded (see ``store.Store``)."""

from __future__ import annotations

from .store import LockBusy, Store

__all__ = ["LockBusy", "WorkerStore"]


class WorkerStore(Store):
    """A ``Store`` whose verbs wait at most ``WATCHDOG['LOCK_TIMEOUT']`` for a lock."""

    def __init__(self, using: str) -> None:
        super().__init__(using, bounded=True)
