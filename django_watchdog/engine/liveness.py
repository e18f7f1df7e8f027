"""Exact liveness for workers on this machine, from their registered pid.

Heartbeats catch every kind of disappearance, but only after WORKER_TIMEOUT, and they can
fall silent for a reason that is not the worker's (a database outage, a lock held past the
timeout). On the worker's own host there is a better witness, its process:

- gone (or a zombie): the worker is **dead** now, whatever its heartbeat says, so its jobs
  are recovered on the next pass;
- running, and started when the worker row says its process started: the worker is
  **alive**, whatever its heartbeat says, so no outage can make its jobs look abandoned;
- stopped (SIGSTOP, a debugger), started at another time (the pid was given to another
  process after the worker died), or on another host: **unknown**; the heartbeat decides.

The start time is read from ``/proc/<pid>/stat`` (Linux). Where there is no ``/proc`` a live
pid counts as alive without that check, so a dead worker whose pid was reused by a process
that is still running keeps its jobs until that process ends.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import NamedTuple

#: Seconds a worker row's ``started_at`` and its pid's process start may differ and still be
#: the same process: both come from /proc (a clock tick apart at most), unless the wall clock
#: was stepped in between (/proc/stat's ``btime`` moves with it; then the heartbeat decides).
SAME_START = 1.0
#: /proc/<pid>/stat states: a process that has ended (zombie, dead) and one that will not
#: run on by itself (stopped, traced).
DEAD_STATES = frozenset("ZXx")
STOPPED_STATES = frozenset("Tt")


def this_host() -> str:
    return socket.gethostname()[:255]


class Process(NamedTuple):
    """What ``/proc/<pid>/stat`` says of a process."""

    state: str
    started_at: datetime


@cache
def _boot_time() -> float | None:
    """When this machine booted (``btime``), in seconds since the epoch; ``None`` without
    ``/proc``."""
    try:
        with open("/proc/stat") as stat:
            for line in stat:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        return None
    return None


def process(pid: int) -> Process | None:
    """State and start time of process ``pid`` from ``/proc``; ``None`` if unreadable."""
    boot = _boot_time()
    if boot is None or pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat") as stat:
            text = stat.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields follow its last ")".
    fields = text[text.rindex(")") + 2 :].split()
    ticks = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start, ticks after boot
    return Process(fields[0], datetime.fromtimestamp(boot + ticks, UTC))


def started_at(pid: int | None = None) -> datetime | None:
    """When process ``pid`` (this one by default) started; ``None`` without ``/proc``."""
    found = process(os.getpid() if pid is None else pid)
    return None if found is None else found.started_at


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


def local_verdict(host: str, pid: int, registered_at: datetime) -> bool | None:
    """Whether the worker registered as (``host``, ``pid``, process start ``registered_at``)
    is alive (``True``), dead (``False``), or unknown here (``None``: ask its heartbeat)."""
    if host != this_host():
        return None
    if not pid_alive(pid):
        return False
    found = process(pid)
    if found is None:  # no /proc here (alive, unchecked), or the process just ended
        return True if _boot_time() is None else None
    if found.state in DEAD_STATES:
        return False
    if found.state in STOPPED_STATES:
        return None
    if abs((found.started_at - registered_at).total_seconds()) > SAME_START:
        return None  # another process has the pid now (or the row predates this rule)
    return True


def alive(host: str, pid: int, registered_at: datetime, *, silent_s: float, timeout: float) -> bool:
    """The one rule for "is this worker alive" (recovery, ``watchdog status``, the admin):
    its process's verdict on its own host, else a heartbeat within ``timeout`` seconds."""
    verdict = local_verdict(host, pid, registered_at)
    return silent_s <= timeout if verdict is None else verdict


@dataclass(frozen=True, kw_only=True, slots=True)
class LocalVerdicts:
    """The workers of this host whose process settles their liveness either way."""

    dead: tuple[str, ...] = ()
    alive: tuple[str, ...] = ()


def judge_local(workers: Iterable[tuple[str, int, datetime]]) -> LocalVerdicts:
    """Sort (worker id, pid, process start) rows registered from this host by verdict."""
    here = this_host()
    dead, living = [], []
    for worker_id, pid, registered_at in workers:
        verdict = local_verdict(here, pid, registered_at)
        if verdict is False:
            dead.append(worker_id)
        elif verdict is True:
            living.append(worker_id)
    return LocalVerdicts(dead=tuple(dead), alive=tuple(living))
