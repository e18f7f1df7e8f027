"""Handlers the acceptance tests run in real worker processes (lanes prefixed ``t-``).

Each run appends one JSON line to the file named by WATCHDOG_TEST_LOG (start and end times,
pid, recovery count), so a test can check from outside that every job ran exactly once and
that runs of one queue never overlapped.
"""

import asyncio
import json
import os
import time

from django_watchdog import OutcomeUnknown, RetryPolicy, handler


def _record(job, event, **extra):
    path = os.environ.get("WATCHDOG_TEST_LOG")
    if not path:
        return
    line = json.dumps(
        {
            "event": event,
            "job_id": job.job_id,
            "queue": job.queue,
            "lane": job.lane,
            "pid": os.getpid(),
            "worker": job.worker_id,
            "recovery_count": job.recovery_count,
            "time": time.time(),
            **extra,
        }
    )
    with open(path, "a") as log:
        log.write(line + "\n")


def _sleep(job, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not job.cancel_requested:
        time.sleep(min(0.01, max(0.0, deadline - time.monotonic())))


def _started_pids():
    """The pids that have recorded a start so far (complete lines only)."""
    path = os.environ.get("WATCHDOG_TEST_LOG")
    if not path or not os.path.exists(path):
        return set()
    with open(path) as log:
        complete = log.read().rpartition("\n")[0]
    return {json.loads(line)["pid"] for line in complete.splitlines() if line}


def _await_pids(job, count, timeout=60.0):
    """Hold the job until ``count`` processes have started jobs (or cancel, or timeout)."""
    deadline = time.monotonic() + timeout
    while len(_started_pids()) < count and not job.cancel_requested:
        if time.monotonic() > deadline:
            return
        time.sleep(0.01)


@handler("t-record")
def record(job):
    """Sleep ``sleep`` seconds (``first_sleep`` on the first run), return ``result``.

    With ``await_pids: N``, the job is held after its start until N worker processes have
    started jobs: a test that needs the work shared arranges it instead of hoping for it.
    """
    payload = job.payload or {}
    _record(job, "start")
    if "await_pids" in payload:
        _await_pids(job, payload["await_pids"])
    seconds = payload.get("sleep", 0)
    if job.recovery_count == 0 and "first_sleep" in payload:
        seconds = payload["first_sleep"]
    _sleep(job, seconds)
    result = payload.get("result")
    if isinstance(result, str) and "{run}" in result:
        result = result.format(run=job.recovery_count + 1)
    _record(job, "end", cancel_requested=job.cancel_requested)
    return result


@handler("t-other")
def other(job):
    _record(job, "start")
    _record(job, "end")
    return "other"


@handler("t-fail")
def fail(job):
    _record(job, "start")
    raise ValueError((job.payload or {}).get("message", "boom"))


@handler("t-unknown")
def unknown(job):
    _record(job, "start")
    raise OutcomeUnknown("the mail server did not answer")


@handler("t-cancel")
def wait_for_cancel(job):
    _record(job, "start")
    while not job.cancel_requested:
        time.sleep(0.01)
    _record(job, "end", cancel_requested=True)
    return "stopped early"


@handler("t-flaky", retry=RetryPolicy(max_attempts=3, backoff=0.2, jitter=0))
def flaky(job):
    """Fail while ``job.attempts`` <= ``fail_until``; then return the attempt number."""
    _record(job, "start", attempt=job.attempts)
    if job.attempts <= (job.payload or {}).get("fail_until", 0):
        raise ConnectionError(f"attempt {job.attempts} failed")
    _record(job, "end", attempt=job.attempts)
    return job.attempts


@handler("t-hang")
def hang(job):
    """Ignore cancel_requested and sleep ``sleep`` seconds."""
    _record(job, "start")
    time.sleep((job.payload or {}).get("sleep", 30))
    _record(job, "end")
    return "woke up"


@handler("t-gate")
def gate(job):
    """On its first run wait until the file named by ``gate`` exists; return the run number."""
    _record(job, "start")
    path = (job.payload or {}).get("gate")
    while job.recovery_count == 0 and path and not os.path.exists(path):
        time.sleep(0.01)
    _record(job, "end")
    return f"run {job.recovery_count + 1}"


if os.environ.get("WATCHDOG_TEST_STALL_QUEUE"):
    from . import stall

    stall.connect()


#: What ``t-poison`` returns or raises, by the payload's ``kind``: values no database (or
#: no JSON encoder) can store as they are.
POISON = {
    "nul-result": lambda: {"text": "page 1\x00page 2"},
    "surrogate-result": lambda: ["a\ud800b"],
    "deep-result": lambda: _nested(100_000),
    "huge-result": lambda: 10**5000,
}


def _nested(depth):
    value = "bottom"
    for _ in range(depth):
        value = [value]
    return value


@handler("t-poison")
def poison(job):
    """Return (``kind`` ending in ``-result``) or raise (``-raise``) a poison value."""
    kind = (job.payload or {})["kind"]
    _record(job, "start", kind=kind)
    if kind == "nul-raise":
        raise ValueError("pdf text \x00 here")
    if kind == "surrogate-raise":
        raise ValueError("half an emoji \ud83d here")
    if kind == "nul-unknown":
        raise OutcomeUnknown("gateway said \x00")
    return POISON[kind]()


@handler("t-async", retry=RetryPolicy(max_attempts=2, backoff=0.1, jitter=0))
async def run_async(job):
    """``async def``: ``mode`` ``fail`` raises (retried once), ``wait`` awaits until the
    worker cancels it (recording that); anything else returns after an ``await``."""
    _record(job, "start", attempt=job.attempts)
    mode = (job.payload or {}).get("mode")
    if mode == "fail":
        raise ConnectionError(f"attempt {job.attempts} failed")
    if mode == "wait":
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            _record(job, "end", cancelled=True)
            raise
    await asyncio.sleep(0.01)
    _record(job, "end", cancelled=False)
    return {"async": job.job_id}
