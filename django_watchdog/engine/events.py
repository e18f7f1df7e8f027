"""One structured log line per claim, settle, conflict, recovery and lane problem.

Each line reads ``event=<event> key=value ...`` and carries the same fields as ``extra``
data (``record.event``, ``record.job_id``, ...), so a JSON formatter picks them out without
parsing the text. A field whose name a ``LogRecord`` already uses gets a ``watchdog_``
prefix in ``extra``.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("django_watchdog.worker")

#: Attribute names every ``LogRecord`` has: ``extra`` must not overwrite them.
RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
}

ExcInfo = BaseException | None


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    text = str(value)
    if not text or any(c in text for c in ' "=\n'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


def log(level: int, event: str, /, *, exc_info: ExcInfo = None, **fields: Any) -> None:
    """Log ``event=<event>`` followed by ``fields`` in order, skipping ``None`` values;
    ``exc_info``: an exception whose traceback the line carries."""
    if not logger.isEnabledFor(level):
        return
    kept = {key: value for key, value in fields.items() if value is not None}
    parts = [f"event={event}"]
    parts.extend(f"{key}={_format(value)}" for key, value in kept.items())
    extra = {"event": event}
    extra.update(
        (f"watchdog_{key}" if key in RECORD_ATTRIBUTES else key, value)
        for key, value in kept.items()
    )
    logger.log(level, " ".join(parts), extra=extra, exc_info=exc_info)


def job(job: Any) -> dict[str, Any]:
    """The fields that name a job in every line about it: ``log(..., **events.job(j))``."""
    return {"job_id": job.job_id, "queue": job.queue, "lane": job.lane}


def claim_skipped(error: Any) -> None:
    """A claimed row failed to decode (``WatchdogError``): the worker goes on with others."""
    log(logging.ERROR, "claim_skipped", job_id=error.job_id, kind=error.kind, error=str(error))


class Deferrals:
    """Logs once that a step for a job waits for a lock another transaction holds (a
    stalled or cut-off worker, until its server ends its transaction), until it is done.

    Used by one thread at a time (the main loop's steps).
    """

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self._logged: set[tuple[str, str]] = set()

    def deferred(self, step: str, job_id: str) -> None:
        if (step, job_id) in self._logged:
            return
        self._logged.add((step, job_id))
        log(
            logging.WARNING,
            f"{step}_deferred",
            job_id=job_id,
            worker=self.worker_id,
            why="its queue is locked by another transaction; retrying on a later pass",
        )

    def done(self, step: str, job_id: str) -> None:
        self._logged.discard((step, job_id))

    def only(self, step: str, job_ids: set[str]) -> None:
        """Of ``step``'s deferrals, forget all but ``job_ids`` (still deferred)."""
        self._logged -= {(s, j) for s, j in self._logged if s == step and j not in job_ids}
