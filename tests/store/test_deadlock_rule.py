"""The deadlock rule's bookkeeping on every database, with a stand-in victim error: how many
runs, what is logged, what a caller's transaction gets. (A real deadlock: test_deadlocks.)"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.db import OperationalError, transaction

from django_watchdog.store import deadlocks
from django_watchdog.store.dialects import dialect

pytestmark = pytest.mark.django_db(transaction=True)

VICTIM = "stand-in deadlock victim"


@pytest.fixture(autouse=True)
def stand_in_victims(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dialect takes an error saying ``VICTIM`` for a deadlock's victim."""
    monkeypatch.setattr(
        type(dialect("default")), "deadlock_victim", lambda self, error: VICTIM in str(error)
    )


def failing(times: int, error: str = VICTIM) -> tuple[Callable[[], str], list[int]]:
    """Work that raises ``error`` in its first ``times`` runs; and its run count."""
    runs = [0]

    def work() -> str:
        runs[0] += 1
        if runs[0] <= times:
            raise OperationalError(error)
        return "done"

    return work, runs


def retried_lines(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records if "deadlock_retried" in r.getMessage()]


def test_a_victim_runs_again_and_each_rerun_is_logged_once(caplog: Any) -> None:
    caplog.set_level(logging.WARNING, logger="django_watchdog.store")
    work, runs = failing(2)
    assert deadlocks.run_retried("default", work, "verb") == "done"
    assert runs == [3]
    lines = retried_lines(caplog)
    assert len(lines) == 2 and "verb=verb" in lines[0] and "attempt=1" in lines[0]


def test_a_victim_every_time_raises_the_servers_error_after_the_last_run() -> None:
    work, runs = failing(deadlocks.ATTEMPTS)
    with pytest.raises(OperationalError, match=VICTIM) as raised:
        deadlocks.run_retried("default", work, "verb")
    assert not isinstance(raised.value, deadlocks.DeadlockRolledBack)
    assert runs == [deadlocks.ATTEMPTS]


def test_other_errors_are_not_run_again() -> None:
    work, runs = failing(1, "connection lost")
    with pytest.raises(OperationalError, match="connection lost"):
        deadlocks.run_retried("default", work, "verb")
    assert runs == [1]


def test_inside_a_callers_transaction_a_victim_raises_deadlock_rolled_back() -> None:
    work, runs = failing(1)
    with pytest.raises(deadlocks.DeadlockRolledBack, match="whole transaction"):
        with transaction.atomic():
            deadlocks.run_retried("default", work, "verb")
    assert runs == [1]


def test_a_verb_inside_another_leaves_the_rerun_to_the_outer_one() -> None:
    inner, inner_runs = failing(deadlocks.ATTEMPTS - 1)

    @deadlocks.retried
    def inner_verb(using: str) -> str:
        return deadlocks.run_retried(using, inner, "inner")

    @deadlocks.retried
    def outer_verb(using: str) -> str:
        with transaction.atomic(using=using):
            return inner_verb(using)

    assert outer_verb("default") == "done"
    assert inner_runs == [deadlocks.ATTEMPTS]  # one run per outer run, never more
