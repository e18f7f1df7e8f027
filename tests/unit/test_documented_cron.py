"""Every cron expression the docs show means what the docs say it means.

A page that shows a new expression must add it here with its meaning: the first ticks
after a fixed instant, as the worker's own schedule parser computes them.
"""

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from django_watchdog.engine.schedules import Schedule

DOCS = Path(__file__).resolve().parents[2] / "docs"
START = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)

#: expression -> (how the docs say it in words, the first three ticks after START in UTC).
MEANINGS = {
    "0 3 * * *": ("03:00 every day", [datetime(2026, 3, d, 3, tzinfo=UTC) for d in (5, 6, 7)]),
    # croniter reads a sixth field as seconds, last
    "* * * * * */10": (
        "every 10 seconds",
        [datetime(2026, 3, 4, 5, 6, s, tzinfo=UTC) for s in (10, 20, 30)],
    ),
    "*/10 * * * * *": (
        "every second of every tenth minute",
        [datetime(2026, 3, 4, 5, 10, s, tzinfo=UTC) for s in (0, 1, 2)],
    ),
}

_CRON = re.compile(r"[`\"]((?:[\w*/,\-?]+ ){4,5}[\w*/,\-?]+)[`\"]")
#: "`<expression>` = <meaning>" or "`<expression>` would be <meaning>", up to ; or )
_SAID = re.compile(r"`((?:[^`\s]+ ){4,5}[^`\s]+)` (?:=|would be|means) ([^;)\n]+)")


def documented_expressions() -> set[str]:
    found = set()
    for page in DOCS.rglob("*.md"):
        for expression in _CRON.findall(page.read_text()):
            if all(re.fullmatch(r"[\d*/,\-?HLW#]+|[A-Za-z]{3}", f) for f in expression.split()):
                found.add(expression)
    return found


def test_the_docs_show_only_expressions_whose_meaning_is_pinned_here():
    shown = documented_expressions()
    assert shown, "the scan found no cron expression in docs/"
    assert shown <= set(MEANINGS), f"add these to MEANINGS: {sorted(shown - set(MEANINGS))}"


def test_what_the_docs_say_an_expression_means_is_its_pinned_meaning():
    said = [
        (page.name, expression, words.strip())
        for page in DOCS.rglob("*.md")
        for expression, words in _SAID.findall(page.read_text())
    ]
    assert said, "the scan found no '`<cron>` = <meaning>' in docs/"
    for page, expression, words in said:
        assert expression in MEANINGS, f"{page}: add {expression!r} to MEANINGS"
        assert words == MEANINGS[expression][0], f"{page} says {expression!r} is {words!r}"


@pytest.mark.parametrize("expression", sorted(MEANINGS))
def test_a_documented_expression_fires_when_the_docs_say(expression):
    schedule = Schedule.parse("docs", cron=expression)
    ticks, after = [], START
    for _ in range(3):
        after = schedule.next_tick(after)
        ticks.append(after)
    assert ticks == MEANINGS[expression][1]
