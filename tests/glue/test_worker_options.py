"""``watchdog_worker`` refuses a timing option it could not run with, naming the option,
before it registers or claims anything."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from django_watchdog.models import Worker

pytestmark = pytest.mark.django_db

BAD_SECONDS = ["nan", "inf", "-inf", "-1", "0", "1e12", "1e400", "soon"]


@pytest.mark.parametrize("option", ["--poll-interval", "--shutdown-grace"])
@pytest.mark.parametrize("text", BAD_SECONDS)
def test_a_bad_number_of_seconds_is_refused_naming_the_option(option: str, text: str) -> None:
    with pytest.raises(CommandError, match=option):
        call_command("watchdog_worker", "--burst", f"{option}={text}")
    assert not Worker.objects.exists()


@pytest.mark.parametrize("option", ["poll_interval", "shutdown_grace"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, 1e12])
def test_a_bad_value_passed_by_keyword_is_refused_too(option: str, value: float) -> None:
    """``call_command(..., poll_interval=...)`` skips the parser's type check."""
    with pytest.raises(CommandError, match=option.replace("_", "-")):
        call_command("watchdog_worker", "--burst", **{option: value})
    assert not Worker.objects.exists()
