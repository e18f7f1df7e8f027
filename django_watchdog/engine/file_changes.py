"""Writes to files, as the kernel reports them (Linux ``inotify``), so a thread that waits
for a file to change sleeps until it does instead of polling it.

Only the standard library (``ctypes`` on the C library's ``inotify_*`` calls). Elsewhere,
or when the kernel refuses a watch (``max_user_instances``/``max_user_watches`` reached),
``FileChanges.watch`` returns ``None`` and the caller keeps polling.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import select
import struct
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

#: inotify event bits (linux/inotify.h): a file in a watched directory was written,
#: created or moved in (SQLite creates its ``-wal`` file when the first connection opens).
IN_MODIFY = 0x002
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC
#: ``struct inotify_event``'s fixed part: wd, mask, cookie, len (then ``len`` name bytes).
EVENT_HEADER = struct.Struct("iIII")
READ_SIZE = 64 * 1024


class FileChanges:
    """Watches some files (by the directories that hold them); ``wait(timeout)`` returns
    once one of them was written, or after ``timeout`` seconds. Not thread-safe: one owner."""

    def __init__(self, fd: int, names: dict[int, frozenset[bytes]]) -> None:
        self._fd = fd
        #: Per watch descriptor, the file names in its directory that count.
        self._names = names
        #: ``interrupt()`` writes here to end a ``wait()`` early (from any thread).
        self._interrupted, self._interrupt = os.pipe()
        os.set_blocking(self._interrupted, False)
        self._closing = threading.Lock()
        self._closed = False

    @classmethod
    def watch(cls, paths: Iterable[str | os.PathLike[str]]) -> FileChanges | None:
        """A watch on ``paths`` (which need not exist yet); ``None`` where the kernel offers
        none (not Linux, no inotify, limits reached)."""
        libc = _libc()
        wanted: dict[Path, set[bytes]] = {}
        for path in paths:
            absolute = Path(path).absolute()
            wanted.setdefault(absolute.parent, set()).add(os.fsencode(absolute.name))
        if libc is None or not wanted:
            return None
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            return None
        names: dict[int, frozenset[bytes]] = {}
        for directory, files in wanted.items():
            wd = libc.inotify_add_watch(
                fd, os.fsencode(directory), IN_MODIFY | IN_CREATE | IN_MOVED_TO
            )
            if wd < 0:
                os.close(fd)
                return None
            names[wd] = frozenset(files)
        return cls(fd, names)

    def wait(self, timeout: float) -> bool:
        """Block until a watched file is written (``True``), or ``timeout`` passes or
        ``interrupt()`` is called (``False``)."""
        readable, _, _ = select.select([self._fd, self._interrupted], [], [], timeout)
        if self._interrupted in readable:
            try:
                os.read(self._interrupted, READ_SIZE)
            except BlockingIOError:  # pragma: no cover - drained by a racing wait
                pass
        return self._fd in readable and self._drain()

    def interrupt(self) -> None:
        """End the current (or next) ``wait()`` now; safe from any thread, also once closed."""
        with self._closing:
            if not self._closed:
                os.write(self._interrupt, b"!")

    def _drain(self) -> bool:
        """Read every pending event; whether one was about a watched file."""
        seen = False
        while True:
            try:
                data = os.read(self._fd, READ_SIZE)
            except BlockingIOError:
                return seen
            except OSError:  # pragma: no cover - a broken descriptor
                return True  # say "changed": the caller checks, so nothing is missed
            offset = 0
            while offset + EVENT_HEADER.size <= len(data):
                wd, _, _, length = EVENT_HEADER.unpack_from(data, offset)
                start = offset + EVENT_HEADER.size
                name = data[start : start + length].rstrip(b"\0")
                if name in self._names.get(wd, ()):
                    seen = True
                offset = start + length

    def close(self) -> None:
        with self._closing:
            self._closed = True
            for fd in (self._fd, self._interrupted, self._interrupt):
                os.close(fd)


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return libc
