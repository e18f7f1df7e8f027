"""Prometheus metrics, with the ``prometheus`` extra (``django-watchdog[prometheus]``).

Two kinds of figures, served apart so a scrape never counts one twice:

- ``DatabaseCollector``: the queue as the database holds it (backlog, oldest ready job, live
  workers, recent settles), the same whichever process reads it; served by ``metrics_view``
  (and by a worker started with ``--metrics-port --metrics-database``);
- ``RunTimes``: what one worker process's handlers did (``watchdog_worker_*``), served by
  that worker's ``--metrics-port``.

Nothing imports ``prometheus_client`` unless this package is imported; without it the
import fails with ``ImproperlyConfigured`` naming the extra.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

try:
    import prometheus_client  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised in a subprocess
    raise ImproperlyConfigured(
        "django_watchdog.prometheus needs the prometheus_client package: "
        "pip install 'django-watchdog[prometheus]'"
    ) from error

from .collector import DatabaseCollector
from .run_times import RunTimes
from .views import metrics_view

__all__ = ["DatabaseCollector", "RunTimes", "metrics_view"]
