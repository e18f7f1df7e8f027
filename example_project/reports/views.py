"""Save a report and enqueue its build in one transaction; show and cancel builds."""

from typing import Any

from django.contrib import messages
from django.db import transaction
from django.db.models import F
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

import django_watchdog
from django_watchdog.models import Job

from .forms import ReportForm
from .models import Report

SHOWN = 50


def enqueue_build(report: Report) -> str:
    """Enqueue the next build of ``report`` in its own queue; call inside a transaction.

    The job id names the build, so a retried request cannot enqueue the same build twice.
    A build whose worker dies mid-run is put back in its queue and run again, twice at most
    (``max_recoveries=2``); a third loss settles it ``interrupted``.
    """
    Report.objects.filter(pk=report.pk).update(builds=F("builds") + 1)
    report.refresh_from_db(fields=["builds"])
    job_id = f"report-{report.pk}-build-{report.builds}"
    django_watchdog.enqueue(
        job_id,
        queue=report.queue,
        lane="reports",
        payload={"report_id": report.pk, "title": report.title, "seconds": report.seconds},
        max_recoveries=2,
    )
    return job_id


def report_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = ReportForm(request.POST)
        if form.is_valid():
            # The report and its job commit together, or neither does: no report without
            # its build, no build of a report that was never saved.
            with transaction.atomic():
                report = form.save()
                enqueue_build(report)
            messages.success(request, f"Report {report.title!r} saved; its build is queued.")
            return redirect("reports:list")
    else:
        form = ReportForm()
    reports = Report.objects.all()[:SHOWN]
    return render(request, "reports/report_list.html", {"form": form, "reports": reports})


@require_GET
def report_states(request: HttpRequest) -> JsonResponse:
    """What the list page polls every second."""
    return JsonResponse({"reports": [state(report) for report in Report.objects.all()[:SHOWN]]})


def state(report: Report) -> dict[str, Any]:
    return {
        "id": report.pk,
        "status": report.status,
        "status_label": report.get_status_display(),
        "cancellation_requested": report.cancellation_requested,
        "last_outcome": report.last_outcome,
        "last_result": report.last_result,
        "builds": report.builds,
    }


@require_POST
def build_again(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue one more build; builds of one report run one after another."""
    report = get_object_or_404(Report, pk=pk)
    with transaction.atomic():
        job_id = enqueue_build(report)
    messages.success(request, f"Queued {job_id}.")
    return redirect("reports:list")


@require_POST
def cancel_build(request: HttpRequest, pk: int) -> HttpResponse:
    """Request cancellation of every pending build of the report."""
    report = get_object_or_404(Report, pk=pk)
    pending = Job.objects.filter(queue=report.queue, state__in=("queued", "running"))
    statuses = [
        django_watchdog.cancel(job_id).status for job_id in pending.values_list("job_id", flat=True)
    ]
    if statuses:
        messages.info(request, f"Cancellation requested for {len(statuses)} build(s).")
    else:
        messages.warning(request, "Nothing to cancel: no build is queued or running.")
    return redirect("reports:list")
