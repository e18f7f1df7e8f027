"""The ``reports`` lane's handler, autodiscovered by django_watchdog (like ``admin.py``)."""

import time
from typing import Any

from django_watchdog import handler

STEP = 0.1  # seconds between looks at job.cancel_requested


@handler("reports")
def build_report(job: Any) -> dict[str, Any]:
    """Pretend to crunch numbers for ``payload["seconds"]``; stop early when cancelled.

    Returning settles the job ``completed`` with this result, unless a cancellation was
    requested: then it settles ``cancelled`` whatever we return.
    """
    seconds = float(job.payload.get("seconds", 4))
    title = str(job.payload.get("title", ""))
    steps = max(1, round(seconds / STEP))
    for step in range(steps):
        if job.cancel_requested:
            return {"stopped_after_seconds": round(step * STEP, 1)}
        time.sleep(STEP)
    if "fail" in title.lower():
        raise RuntimeError(f"report {title!r} asked to fail")
    words = title.split()
    return {"words": len(words), "letters": sum(len(word) for word in words), "build": job.job_id}
