"""Project each report queue's head onto ``Report.status``, atomically with the change.

``queue_changed`` is sent inside the transaction that changed the queue, so the report row
and the job rows can never disagree: if this receiver raised, the change would roll back.
"""

from typing import Any

from django.dispatch import receiver

from django_watchdog import QueueHead
from django_watchdog.signals import queue_changed

from .models import Report, report_id


@receiver(queue_changed, dispatch_uid="reports.project_queue_head")
def project_queue_head(
    sender: Any, *, queue: str, head: QueueHead, settled: Any = None, **kwargs: Any
) -> None:
    pk = report_id(queue)
    if pk is None:
        return
    changes: dict[str, Any] = {"cancellation_requested": head.cancellation_requested}
    if settled is not None:
        changes["last_outcome"] = settled.outcome
        changes["last_result"] = settled.result
    if head.state == "idle":
        # Nothing left to run: the report shows how its last build ended.
        last = changes.get("last_outcome") or (
            Report.objects.filter(pk=pk).values_list("last_outcome", flat=True).first()
        )
        changes["status"] = last or "idle"
    else:
        changes["status"] = head.state
    Report.objects.filter(pk=pk).update(**changes)
