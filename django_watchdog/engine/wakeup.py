"""Wake-up: tell an idle worker that there may be work, sooner than its next poll.

PostgreSQL: ``LISTEN`` on the notification channel; enqueue (and anything that makes a job
ready) sends ``NOTIFY`` inside its transaction, so it arrives at commit. SQLite: ``PRAGMA
data_version`` tells any other connection's commit; on Linux the waker reads it when the
kernel reports a write to the database or its write-ahead log (``inotify``), and sleeps
otherwise; elsewhere it polls it every few milliseconds. MariaDB (no NOTIFY): every
``PROBE_INTERVAL`` one statement reads the best ready job of the worker's lanes (a walk of
the claim index) and when the next delayed job or retry comes due (an end of two
indexes); a new job or a new due time wakes the worker, which then claims and re-reads
its next due time. Either way the worker still polls at ``POLL_INTERVAL`` as a fallback.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import DatabaseError, connections

from ..conf import listen_alias, setting
from ..store.dialects import dialect, supported
from .file_changes import FileChanges

logger = logging.getLogger("django_watchdog.worker")

SQLITE_CHECK_INTERVAL = 0.005
#: With file watching: after a write, ``data_version`` is read every SQLITE_CHECK_INTERVAL
#: for this long (the write that woke us may precede the commit that changes the version by
#: a moment), then the waker sleeps until the next write, or SQLITE_IDLE_CHECK at most.
SQLITE_AFTER_WRITE = 0.025
SQLITE_IDLE_CHECK = 1.0
#: Seconds between two probes of an idle worker on MariaDB (one statement each). Measured
#: (docs/how-to/mariadb.md): 0.1 s wakes in p50 60 ms for 0.8 % of a core idle; 20 ms
#: halved the latency for three times the CPU, over the idle-worker test's 1.5 % budget.
PROBE_INTERVAL = 0.1
LISTEN_RECONNECT_MAX = 5.0


class Waker:
    """Sets ``event`` whenever new work may be ready; runs in its own daemon thread.

    ``wanted`` says whether the worker could take work now (a free slot): while it cannot,
    a waker that polls stops polling, since a busy job thread claims its next job itself
    and the freed slot wakes the worker anyway.
    """

    #: Whether the waker tells of every new due time the worker could not know, a delayed
    #: job's enqueue or another worker's retry (NOTIFY, a write to SQLite's files, a
    #: sooner due time in the probe). Without it the worker keeps looking for due jobs
    #: every idle poll.
    TELLS_EVERY_CHANGE = True

    def __init__(self, using: str, event: threading.Event, wanted: Callable[[], bool]) -> None:
        self.using = using
        self.event = event
        self.wanted = wanted
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="watchdog-waker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _run(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class SqliteWaker(Waker):
    """Reads ``PRAGMA data_version`` when the database's files are written (Linux), else
    every SQLITE_CHECK_INTERVAL; a changed version wakes the worker."""

    _changes: FileChanges | None = None

    def stop(self) -> None:
        self._stopped.set()
        changes = self._changes
        if changes is not None:
            changes.interrupt()
        super().stop()

    def _run(self) -> None:
        changes = self._changes = FileChanges.watch(dialect(self.using).database_files())
        last: int | None = None
        polling_until = 0.0
        try:
            while not self._stopped.is_set():
                if not self.wanted():
                    self._stopped.wait(SQLITE_CHECK_INTERVAL)
                    continue
                try:
                    version = dialect(self.using).data_version()
                except DatabaseError as error:
                    logger.warning("event=wake_unavailable error=%r", error)
                    connections[self.using].close()
                    self._stopped.wait(1.0)
                    continue
                if last is not None and version != last:
                    self.event.set()
                last = version
                if changes is None or time.monotonic() < polling_until:
                    self._stopped.wait(SQLITE_CHECK_INTERVAL)
                elif self._sleep_until_written(changes):
                    polling_until = time.monotonic() + SQLITE_AFTER_WRITE
        finally:
            self._changes = None
            if changes is not None:
                changes.close()
            connections[self.using].close()

    def _sleep_until_written(self, changes: FileChanges) -> bool:
        """Sleep until the database's files are written (``True``), SQLITE_IDLE_CHECK
        passes or the waker stops; writes to other files in their directory do not end it."""
        deadline = time.monotonic() + SQLITE_IDLE_CHECK
        while not self._stopped.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if changes.wait(remaining):
                return True
        return False


Probe = Callable[[], tuple[object, ...] | None]


def is_news(found: tuple[object, ...] | None, last: tuple[object, ...] | None) -> bool:
    """Whether the probe read a value (a ready job's id, a due time) that was not in the
    last row it read: one that appeared or changed is news, one that went away is not
    (the job was taken, the delay came due)."""
    if found is None:
        return False
    before = last if last is not None else (None,) * len(found)
    return any(now is not None and now != then for now, then in zip(found, before, strict=True))


class ProbeWaker(Waker):
    """Wakes the worker when the probe reads a value it did not read before (``is_news``):
    a job that stays ready (another claimer holds its queue) or a due time that stays the
    next wakes it once, not every probe.

    A due time sooner than every other changes the probe's next due time, and one that
    is not was already read by the worker (woken for the sooner one, it re-reads its next
    due time until none is left), so the worker learns every new due time within a
    probe round. A new ready job that is not the best while a better one stays ready (its
    queue held by another transaction) waits for the worker's next poll."""

    def __init__(
        self,
        using: str,
        event: threading.Event,
        wanted: Callable[[], bool],
        probe: Probe,
    ) -> None:
        super().__init__(using, event, wanted)
        self.probe = probe

    def _run(self) -> None:
        last: tuple[object, ...] | None = None
        try:
            while not self._stopped.is_set():
                if not self.wanted():
                    last = None  # busy: what is ready when a slot frees is news again
                    self._stopped.wait(PROBE_INTERVAL)
                    continue
                try:
                    found = self.probe()
                except DatabaseError as error:
                    logger.warning("event=wake_unavailable error=%r", error)
                    connections[self.using].close()
                    self._stopped.wait(1.0)
                    continue
                if is_news(found, last):
                    self.event.set()
                last = found
                self._stopped.wait(PROBE_INTERVAL)
        finally:
            connections[self.using].close()


class PostgresWaker(Waker):
    def _run(self) -> None:
        import psycopg

        channel = str(setting("NOTIFY_CHANNEL"))
        backoff = 0.1
        while not self._stopped.is_set():
            try:
                with dialect(self.using).notifications(channel) as listener:
                    # Anything sent while we were not listening is not replayed: look once.
                    self.event.set()
                    backoff = 0.1
                    while not self._stopped.is_set():
                        for _ in listener.notifies(timeout=0.5):
                            self.event.set()
            except psycopg.Error as error:
                logger.warning("event=wake_unavailable error=%r retry_in=%.1fs", error, backoff)
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, LISTEN_RECONNECT_MAX)


def make_waker(
    using: str,
    event: threading.Event,
    wanted: Callable[[], bool],
    probe: Probe | None = None,
) -> Waker | None:
    """The waker of a worker on ``using`` (what the database offers: ``Dialect.WAKE``);
    ``None`` where it can only poll. ``probe`` reads the best ready job of the worker's
    lanes and the next due time (``Store.ready_probe``), for databases woken by probing.

    Notifications are listened for on ``LISTEN_DATABASE`` when set (a direct connection to
    the same database), else on ``using`` itself, except behind a transaction pooler."""
    if not supported(using):
        return None
    kind = dialect(using).WAKE
    if kind == "notify":
        alias = listen_alias(using)
        if alias is None:
            logger.info("event=listen_unavailable reason=transaction_pooler fallback=poll")
            return None
        return PostgresWaker(alias, event, wanted)
    if kind == "data_version":
        return SqliteWaker(using, event, wanted)
    if kind == "probe" and probe is not None:
        return ProbeWaker(using, event, wanted, probe)
    return None
