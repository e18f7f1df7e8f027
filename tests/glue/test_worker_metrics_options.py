"""``watchdog_worker --metrics-port``: refused clearly without the extra or with a bad port;
with it, the handlers run as registered."""

import io
import sys

import pytest
from django.core.management import CommandError, call_command

import django_watchdog as watchdog
from django_watchdog.signals import job_started
from tests.testapp import inline_handlers


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


@pytest.mark.django_db(transaction=True)
def test_with_metrics_on_signals_name_the_registered_handler_and_run_times_are_counted(
    monkeypatch,
):
    """The run-time figures come from ``job_started``/``job_finished``: the worker runs the
    handlers as registered, so a receiver connected with ``sender=handler`` still hears."""
    from django_watchdog.prometheus import worker as worker_metrics

    served = []

    def serve(*args, **kwargs):
        served.append(worker_metrics_serve(*args, **kwargs))
        return served[-1]

    worker_metrics_serve = worker_metrics.serve
    monkeypatch.setattr(worker_metrics, "serve", serve)
    heard = []

    def on_started(sender, job, **kwargs):
        heard.append((job.job_id, sender))

    job_started.connect(on_started, sender=inline_handlers.echo, weak=False)
    try:
        watchdog.enqueue("echo:1", queue="echo:1", lane="i-echo", payload="hi")
        watchdog.enqueue("mail:1", queue="mail:1", lane="i-broken")
        call_command(
            "watchdog_worker",
            "--metrics-port",
            "0",
            "--metrics-address",
            "127.0.0.1",
            "--burst",
            "--lane",
            "i-echo",
            "--lane",
            "i-broken",
            stdout=io.StringIO(),
        )
    finally:
        job_started.disconnect(on_started, sender=inline_handlers.echo)
    assert heard == [("echo:1", inline_handlers.echo)]
    (metrics,) = served
    count = "watchdog_worker_job_run_seconds_count"
    figures = metrics.registry.get_sample_value
    assert figures(count, {"lane": "i-echo", "ended": "returned"}) == 1
    assert figures(count, {"lane": "i-broken", "ended": "raised"}) == 1
    assert figures("watchdog_worker_jobs_in_progress", {"lane": "i-echo"}) == 0
