"""Exact liveness for workers on this machine: a registered pid that no longer exists is dead.

Heartbeats catch every kind of disappearance, but only after WORKER_TIMEOUT. A worker that
was killed on this host is known dead at once, so its jobs are recovered on the next pass.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable


def this_host() -> str:
    return socket.gethostname()[:255]


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


def dead_local_workers(workers: Iterable[tuple[str, int]], *, own_pid: int) -> list[str]:
    """Worker ids among ``workers`` (id, pid) registered here whose process is gone."""
    return [worker_id for worker_id, pid in workers if pid != own_pid and not pid_alive(pid)]
