"""``watchdog_worker --metrics-port``: refused clearly without the extra or with a bad port."""

import sys

import pytest
from django.core.management import CommandError, call_command


def test_the_worker_refuses_a_metrics_port_without_the_extra(monkeypatch):
    for name in [m for m in sys.modules if m.startswith("django_watchdog.prometheus")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(CommandError, match=r"--metrics-port: .*django-watchdog\[prometheus\]"):
        call_command("watchdog_worker", "--metrics-port", "0", "--burst")


@pytest.mark.parametrize("port", ["-1", "65536"])
def test_the_worker_refuses_a_bad_metrics_port(port):
    with pytest.raises(CommandError, match="--metrics-port"):
        call_command("watchdog_worker", "--metrics-port", port, "--burst")
