"""Start-up with an app that imports tasks in its ready() (as Wagtail does), in both
INSTALLED_APPS orders: no crash, lanes that do not clash, each check message once."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORT = """
import json, django
django.setup()
from django.core import checks
from django_watchdog import handlers
# The task backend's checks (E1xx): the others are about this throwaway SQLite file.
messages = [
    (m.id, m.msg) for m in checks.run_checks() if (m.id or "").startswith("django_watchdog.E1")
]
lanes = {lane: f"{f.__module__}.{f.__qualname__}" for lane, f in handlers.registered().items()}
print(json.dumps({"messages": messages, "lanes": lanes}))
"""


def start(order: str, *, clash: bool = False) -> dict:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.tasks_order.settings",
        "WATCHDOG_ORDER": order,
        "WATCHDOG_CLASH": "1" if clash else "0",
    }
    done = subprocess.run(
        [sys.executable, "-c", REPORT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("order", ["first", "last"])
def test_a_projects_default_handler_and_the_task_queue_default_live_side_by_side(order):
    report = start(order)
    assert report["lanes"]["default"] == "tests.tasks_order.project.jobs.native_default"
    assert report["lanes"]["task:default"] == "django_watchdog.tasks.runner.run_task"


@pytest.mark.parametrize("order", ["first", "last"])
def test_each_backend_check_message_appears_once(order):
    ids = [message_id for message_id, _ in start(order)["messages"]]
    assert ids == ["django_watchdog.E105"]


@pytest.mark.parametrize("order", ["first", "last"])
def test_a_handler_on_a_task_lane_is_reported_whatever_the_app_order(order):
    messages = start(order, clash=True)["messages"]
    assert sorted(message_id for message_id, _ in messages) == [
        "django_watchdog.E104",
        "django_watchdog.E105",
    ]
    assert any("tests.tasks_order.project.jobs.clash" in text for _, text in messages)
