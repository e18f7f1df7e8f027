"""The code the tutorial and the how-to guides show runs, and says what it prints.

A fenced block preceded by ``<!-- docs-test: SESSION -->`` is run; the blocks of one session
on one page run in order, in one namespace, on a fresh database, after that session's setup
below (the state the page assumes: jobs an earlier step created, names the reader's own code
would define). A ``pycon`` block is a doctest: its printed results are checked. A ``python``
block must run without raising; the ``test_*`` functions it defines are then called, each
on an empty job table, and a ``WATCHDOG`` settings dict it defines must pass watchdog's
system checks. Blocks
without the marker (settings, models of the reader's app, a worker loop) are not run.
"""

from __future__ import annotations

import doctest
import re
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from django.test import override_settings

import django_watchdog as wd
from django_watchdog import checks, handlers, schedules
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job
from django_watchdog.store.store import Store

pytestmark = pytest.mark.django_db

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGES = [DOCS / "tutorial.md", *sorted((DOCS / "how-to").glob("*.md"))]
_MARKED = re.compile(
    r"<!-- docs-test: (?P<session>[\w-]+) -->\n```(?P<kind>pycon|python)\n(?P<code>.*?)\n```",
    re.S,
)


def sessions() -> dict[str, list[tuple[str, str, int]]]:
    """``page:session`` -> its blocks (kind, code, line of the code's first line)."""
    found: dict[str, list[tuple[str, str, int]]] = {}
    for page in PAGES:
        text = page.read_text()
        for match in _MARKED.finditer(text):
            line = text.count("\n", 0, match.start("code")) + 1
            key = f"{page.relative_to(DOCS)}:{match['session']}"
            found.setdefault(key, []).append((match["kind"], match["code"], line))
    return found


# -- what each page assumes ---------------------------------------------------------------


def _run(job_id: str, decision: Decision) -> None:
    claim = Store().claim()
    assert claim.job.job_id == job_id
    Store().settle(job_id, claim.claim_token, decision)


def _tutorial() -> dict[str, Any]:
    """Steps 4-6: the view enqueued report 1 and a worker built it (500 rows)."""
    wd.enqueue(
        "report:1", queue="report:1", lane="reports", payload={"report": 1}, max_recoveries=1
    )
    _run("report:1", Decision.completed({"rows": 500}))
    return {}


def _cancel() -> dict[str, Any]:
    wd.enqueue("report:42", queue="report:42", lane="reports")
    return {"request_id": "r-1", "chunks": lambda file: [], "load": lambda chunk: None}


def _fail_lane() -> dict[str, Any]:
    for n in range(3):
        wd.enqueue(f"sms:{n}", queue=f"phone:{n}", lane="sms")
    wd.enqueue("newsletter:1", queue="newsletter:2024-06", lane="mail")
    return {}


def _settled_feed() -> dict[str, Any]:
    wd.enqueue("sms:1", queue="phone:1", lane="sms")
    _run("sms:1", Decision.completed())
    return {"sms_cursor": None, "rest_cursor": None}


def _delays() -> dict[str, Any]:
    class Order:
        objects = SimpleNamespace(create=lambda *args, **kwargs: SimpleNamespace(pk=7))

    return {"Order": Order, "post": lambda *a, **k: None, "chunks": lambda r: [], "process": id}


SETUPS: dict[str, Callable[[], dict[str, Any]]] = {
    "tutorial.md:tutorial": _tutorial,
    "how-to/cancel.md:how-to": _cancel,
    "how-to/fail-lane.md:how-to": _fail_lane,
    "how-to/settled-feed.md:how-to": _settled_feed,
    "how-to/delays-retries-timeouts.md:how-to": _delays,
    "how-to/recover.md:how-to": dict,
    "how-to/schedules.md:how-to": dict,
    "how-to/operations.md:how-to": dict,
    "how-to/logs-and-signals.md:how-to": dict,
}


def test_the_pages_keep_their_runnable_examples():
    """A marker dropped from a page (or a page renamed) would silently stop its test."""
    assert set(sessions()) == set(SETUPS)
    assert len(sessions()["tutorial.md:tutorial"]) == 2


@pytest.fixture
def clean_registries():
    """Handlers and schedules a page registers are forgotten after its test."""
    lanes, names = handlers.registered(), schedules.registered()
    yield
    for lane in set(handlers.registered()) - set(lanes):
        handlers.unregister(lane)
    for name in set(schedules.registered()) - set(names):
        schedules.unregister(name)


@pytest.mark.parametrize("session", sorted(SETUPS))
def test_documented_code_runs(session, clean_registries):
    namespace: dict[str, Any] = {"__name__": "docs_example", **SETUPS[session]()}
    page = session.split(":")[0]
    for kind, code, line in sessions()[session]:
        where = f"docs/{page}, line {line}"
        if kind == "pycon":
            test = doctest.DocTestParser().get_doctest(code, namespace, where, page, line - 1)
            output: list[str] = []
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS, verbose=False)
            runner.run(test, out=output.append, clear_globs=False)
            assert runner.failures == 0, f"{where}:\n" + "".join(output)
            namespace = test.globs  # the session goes on with what the block defined
        else:
            exec(compile(code, where, "exec"), namespace)  # noqa: S102 - the docs' own code
    for name, function in list(namespace.items()):
        if name.startswith("test_") and callable(function):
            Job.objects.all().delete()  # a test the page shows starts from an empty table
            function(None)
    if "WATCHDOG" in namespace:
        with override_settings(WATCHDOG=namespace["WATCHDOG"]):
            problems = checks.check_settings() + checks.check_operations()
        assert [str(problem) for problem in problems] == []
