"""Handler decisions (SPEC §4.6): what a handler returned or raised becomes an outcome."""

from __future__ import annotations

import math
from typing import Any

import pytest

from django_watchdog import OutcomeUnknown
from django_watchdog.domain import decisions
from django_watchdog.domain.states import Outcome
from django_watchdog.domain.values import Decision


def _raised(error: BaseException) -> BaseException:
    """``error`` with a traceback, as a handler would have raised it."""
    try:
        raise error
    except BaseException as caught:  # noqa: BLE001 - we want the exact object back
        return caught


@pytest.mark.parametrize("value", [None, 3, "done", [1, {"a": 2.5}], {"n": None}])
def test_return_completes_with_the_value_as_result(value: Any) -> None:
    decision, warning = decisions.from_return(value)
    assert decision == Decision(outcome=Outcome.COMPLETED, result=value)
    assert decision.failure_reason is None
    assert warning is None


@pytest.mark.parametrize("value", [object(), {1, 2}, math.nan, {"a": b"x"}])
def test_return_of_a_non_json_value_still_completes_and_drops_the_result(value: Any) -> None:
    decision, warning = decisions.from_return(value)
    assert decision.outcome == Outcome.COMPLETED
    assert decision.result is None
    assert warning is not None and warning.startswith("result dropped")


def test_outcome_unknown_is_not_failed_and_keeps_the_traceback() -> None:
    decision = decisions.from_exception(_raised(OutcomeUnknown("charge may have gone through")))
    assert decision.outcome == Outcome.OUTCOME_UNKNOWN
    assert decision.failure_reason is None
    assert decision.traceback is not None
    assert "charge may have gone through" in decision.traceback


def test_subclass_of_outcome_unknown_is_outcome_unknown() -> None:
    class GatewayTimeout(OutcomeUnknown):
        pass

    assert decisions.from_exception(GatewayTimeout()).outcome == Outcome.OUTCOME_UNKNOWN


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (ValueError("bad value"), "ValueError: bad value"),
        (KeyError("k"), "KeyError: 'k'"),
        (RuntimeError(), "RuntimeError"),
        (ZeroDivisionError("division by zero"), "ZeroDivisionError: division by zero"),
    ],
)
def test_other_exception_fails_with_type_and_message(error: Exception, reason: str) -> None:
    decision = decisions.from_exception(_raised(error))
    assert decision.outcome == Outcome.FAILED
    assert decision.failure_reason == reason
    assert decision.traceback is not None
    assert "Traceback (most recent call last)" in decision.traceback
    assert type(error).__name__ in decision.traceback


def test_reason_is_cut_to_200_characters_and_the_traceback_keeps_everything() -> None:
    message = "m" * 500
    decision = decisions.from_exception(_raised(ValueError(message)))
    assert decision.failure_reason == ("ValueError: " + message)[:200]
    assert len(decision.failure_reason or "") == 200
    assert decision.traceback is not None and message in decision.traceback


def test_custom_exception_names_its_own_class() -> None:
    class PaymentDeclined(Exception):
        pass

    reason = decisions.failure_reason(PaymentDeclined("card expired"))
    assert reason == "PaymentDeclined: card expired"


def test_exception_without_traceback_still_maps() -> None:
    decision = decisions.from_exception(ValueError("never raised"))
    assert decision.failure_reason == "ValueError: never raised"


def test_decision_constructors() -> None:
    assert Decision.completed(5) == Decision(outcome=Outcome.COMPLETED, result=5)
    assert Decision.failed("E: x").failure_reason == "E: x"
    assert Decision.outcome_unknown().outcome == Outcome.OUTCOME_UNKNOWN


# -- every outcome is storable (SPEC §9 rule 17) -------------------------------------------


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (_nested(100_000), "nested too deeply"),
        (10**5000, "not JSON-serialisable"),
        ({"text": "page 1\x00page 2"}, "NUL"),
        ({"key\x00": 1}, "NUL"),
        (["a\ud800b"], "lone surrogate"),
        ({"\udfff": 1}, "lone surrogate"),
    ],
    ids=["deep", "huge-int", "nul", "nul-key", "surrogate", "surrogate-key"],
)
def test_a_result_no_database_can_hold_is_dropped_and_the_job_says_why(
    value: Any, why: str
) -> None:
    decision, warning = decisions.from_return(value)
    assert decision.outcome == Outcome.COMPLETED
    assert decision.result is None
    assert warning is not None and warning.startswith("result dropped") and why in warning
    assert decision.traceback == warning, "the stored job says what happened to its result"


@pytest.mark.parametrize("value", ["a\\u0000b", {"path": "C:\\\\u0000"}, "\u00e9\U0001f600"])
def test_text_that_only_looks_like_a_nul_escape_is_kept(value: Any) -> None:
    decision, warning = decisions.from_return(value)
    assert warning is None and decision.result == value


def test_exception_text_with_nul_and_lone_surrogates_is_escaped_not_lost() -> None:
    decision = decisions.from_exception(_raised(ValueError("pdf said \x00 and \ud83d here")))
    assert decision.failure_reason == "ValueError: pdf said \\x00 and \\ud83d here"
    assert decision.traceback is not None
    assert "pdf said \\x00 and \\ud83d here" in decision.traceback
    assert "\x00" not in decision.traceback
    decision.traceback.encode("utf-8")  # no lone surrogate left


def test_an_exception_whose_str_raises_still_fails_with_a_reason() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str for you")

    decision = decisions.from_exception(_raised(Unprintable()))
    assert decision.outcome == Outcome.FAILED
    assert decision.failure_reason is not None
    assert decision.failure_reason.startswith("Unprintable")
    assert decision.traceback is not None


def test_an_escaped_reason_is_still_cut_to_200_characters() -> None:
    decision = decisions.from_exception(_raised(ValueError("\x00" * 300)))
    assert decision.failure_reason is not None and len(decision.failure_reason) == 200


def test_after_failure_retries_with_the_policys_backoff_until_its_attempts_are_spent() -> None:
    from datetime import UTC, datetime, timedelta

    from django_watchdog import RetryPolicy

    now = datetime(2026, 1, 1, tzinfo=UTC)
    policy = RetryPolicy(max_attempts=2, backoff=30, jitter=0)
    error = _raised(ConnectionError("down"))
    first = decisions.after_failure(
        error, policy=policy, attempts=1, cancel_requested=False, now=now
    )
    assert (first.outcome, first.retry_at) == (Outcome.FAILED, now + timedelta(seconds=30))
    assert first.failure_reason == "ConnectionError: down"
    for attempts, cancel_requested, chosen in [
        (2, False, policy),
        (1, True, policy),
        (1, False, None),
    ]:
        final = decisions.after_failure(
            error, policy=chosen, attempts=attempts, cancel_requested=cancel_requested, now=now
        )
        assert (final.outcome, final.retry_at) == (Outcome.FAILED, None)
    unknown = decisions.after_failure(
        _raised(OutcomeUnknown("?")), policy=policy, attempts=1, cancel_requested=False, now=now
    )
    assert (unknown.outcome, unknown.retry_at) == (Outcome.OUTCOME_UNKNOWN, None)


@pytest.mark.parametrize("value", [None, True, False])
def test_nothing_and_booleans_are_stored_as_returned(value: Any) -> None:
    decision, warning = decisions.from_return(value)
    assert warning is None and decision.result is value and decision.traceback is None
