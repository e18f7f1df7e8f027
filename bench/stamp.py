"""What every benchmark handler does: append ``tag pid time`` to the stamp file, nothing else.

One ``os.write`` on an ``O_APPEND`` descriptor per job, atomic for lines this short, so the
worker processes (and threads) of every system share one file. No Django import.
"""

from __future__ import annotations

import os
import time

_fd: int | None = None
_pid: int | None = None


def stamp(tag: object) -> None:
    """Record that the job tagged ``tag`` started now (seconds since the epoch)."""
    now = time.time()
    global _fd, _pid
    pid = os.getpid()
    if _fd is None or _pid != pid:
        _fd = os.open(os.environ["BENCH_STAMP_FILE"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        _pid = pid
    os.write(_fd, f"{tag} {pid} {now:.6f}\n".encode())
