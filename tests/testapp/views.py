"""Views that enqueue, for the tests of ``django_watchdog.testing`` and the async API."""

from django.contrib.auth.models import User
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse

import django_watchdog as watchdog

WELCOME_LANE = "i-welcome"


def signup(request: HttpRequest) -> HttpResponse:
    """Create a user and enqueue their welcome job in one transaction."""
    with transaction.atomic():
        user = User.objects.create(username=request.POST["username"])
        watchdog.enqueue(
            f"welcome:{user.pk}",
            queue=f"user:{user.pk}",
            lane=WELCOME_LANE,
            payload={"user": user.pk},
        )
    return HttpResponse(f"user {user.pk}", status=201)


async def asignup(request: HttpRequest) -> HttpResponse:
    """The async twin of ``signup``: enqueues with ``aenqueue`` and reads the job back."""
    user = await User.objects.acreate(username=request.POST["username"])
    job_id = f"welcome:{user.pk}"
    result = await watchdog.aenqueue(
        job_id, queue=f"user:{user.pk}", lane=WELCOME_LANE, payload={"user": user.pk}
    )
    job = await watchdog.aget_job(job_id)
    head = await watchdog.aqueue_head(f"user:{user.pk}")
    return JsonResponse(
        {
            "status": result.status,
            "state": job.state if job else None,
            "head": head.job_id,
        },
        status=201,
    )
