"""One structured ``key=value`` log line per claim, settle, conflict, recovery and lane problem."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger("django_watchdog.worker")


def _format(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    text = str(value)
    if not text or any(c in text for c in ' "=\n'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


def log(level: int, event: str, /, **fields: Any) -> None:
    """Log ``event=<event>`` followed by ``fields`` in order, skipping ``None`` values."""
    if not logger.isEnabledFor(level):
        return
    parts = [f"event={event}"]
    parts.extend(f"{key}={_format(value)}" for key, value in fields.items() if value is not None)
    logger.log(level, " ".join(parts))


def job(job: Any) -> dict[str, Any]:
    """The fields that name a job in every line about it: ``log(..., **events.job(j))``."""
    return {"job_id": job.job_id, "queue": job.queue, "lane": job.lane}
