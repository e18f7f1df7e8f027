"""Handlers (lanes ``i-*``) for the tests of ``django_watchdog.testing``."""

from django.contrib.auth.models import User

import django_watchdog as watchdog
from django_watchdog import OutcomeUnknown, RetryPolicy, handler

from .views import WELCOME_LANE


@handler(WELCOME_LANE)
def welcome(job):
    """Reads the user row the view (or the test) created, in the same transaction."""
    user = User.objects.get(pk=job.payload["user"])
    return f"welcome {user.username}"


@handler("i-echo")
def echo(job):
    return job.payload


@handler("i-broken")
def broken(job):
    raise ValueError(f"no mail server for {job.job_id}")


@handler("i-unknown")
def unknown(job):
    raise OutcomeUnknown("the gateway timed out")


@handler("i-flaky", retry=RetryPolicy(max_attempts=3, backoff=60, jitter=0))
def flaky(job):
    if job.attempts < job.payload["succeed_at"]:
        raise ConnectionError(f"attempt {job.attempts}")
    return job.attempts


@handler("i-chain")
def chain(job):
    """Enqueue the next link, forever: for the ``max_runs`` guard."""
    watchdog.enqueue(f"{job.job_id}+", queue=job.queue, lane="i-chain")


@handler("i-duplicate-user")
def duplicate_user(job):
    """Break a unique constraint: on PostgreSQL this aborts the enclosing transaction."""
    User.objects.create(username=job.payload)


@handler("i-async")
async def async_welcome(job):
    user = await User.objects.aget(pk=job.payload["user"])
    return f"hello {user.username}"


@handler("i-unstorable")
def unstorable(job):
    """Return what no database can store as JSON."""
    return {"pdf": "page 1\x00page 2"}
