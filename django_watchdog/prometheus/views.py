"""``metrics_view``: the database figures in Prometheus's text format, for a URLconf."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from .collector import DatabaseCollector


@require_GET
def metrics_view(request: HttpRequest, using: str = "default") -> HttpResponse:
    """Serve ``DatabaseCollector(using)``'s figures (mount it where only Prometheus reaches)."""
    return HttpResponse(generate_latest(DatabaseCollector(using)), content_type=CONTENT_TYPE_LATEST)
