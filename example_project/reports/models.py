"""A report: the user's record. Its ``status`` is projected from its queue by ``projection``."""

import json

from django.db import models


class Report(models.Model):
    """One report; every build of it is a job in the report's own queue, ``report-<pk>``."""

    STATUSES = [
        ("idle", "idle"),
        ("queued", "queued"),
        ("running", "running"),
        ("completed", "completed"),
        ("failed", "failed"),
        ("cancelled", "cancelled"),
        ("outcome_unknown", "outcome unknown"),
        ("interrupted", "interrupted"),
    ]

    title = models.CharField(max_length=200)
    seconds = models.PositiveSmallIntegerField(default=4)
    builds = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=20, choices=STATUSES, default="idle")
    cancellation_requested = models.BooleanField(default=False)
    last_outcome = models.CharField(max_length=20, blank=True, default="")
    last_result = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-id",)

    def __str__(self) -> str:
        return self.title

    @property
    def last_result_json(self) -> str:
        """The last build's result as the page's JavaScript shows it (compact JSON)."""
        if self.last_result is None:
            return ""
        return json.dumps(self.last_result, separators=(",", ":"), ensure_ascii=False)

    @property
    def queue(self) -> str:
        return queue_name(self.pk)


def queue_name(pk: int) -> str:
    """The serial queue of report ``pk``: its builds never overlap."""
    return f"report-{pk}"


def report_id(queue: str) -> int | None:
    """The report a queue belongs to, or ``None`` for another app's queue."""
    prefix, _, number = queue.partition("-")
    return int(number) if prefix == "report" and number.isdigit() else None
