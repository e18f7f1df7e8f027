"""A URLconf with the metrics view mounted (tests/glue/test_metrics.py)."""

from django.urls import path

from django_watchdog.prometheus import metrics_view

urlpatterns = [path("metrics/", metrics_view, name="watchdog-metrics")]
