"""Retry policies (domain.retries): validation, which errors retry, backoff, JSON form."""

from __future__ import annotations

import random
from typing import Any

import pytest

from django_watchdog import InvalidInput, OutcomeUnknown
from django_watchdog.domain.retries import RetryPolicy


class Flaky(Exception):
    """A project's own retryable error."""


class VeryFlaky(Flaky):
    pass


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"max_attempts": 0}, "retry.max_attempts"),
        ({"max_attempts": 1001}, "retry.max_attempts"),
        ({"max_attempts": True}, "retry.max_attempts"),
        ({"max_attempts": 3.0}, "retry.max_attempts"),
        ({"max_attempts": "3"}, "retry.max_attempts"),
        ({"backoff": -1}, "retry.backoff"),
        ({"backoff": 86_401}, "retry.backoff"),
        ({"backoff": "1"}, "retry.backoff"),
        ({"backoff": False}, "retry.backoff"),
        ({"multiplier": 0.5}, "retry.multiplier"),
        ({"multiplier": 101}, "retry.multiplier"),
        ({"max_backoff": -0.1}, "retry.max_backoff"),
        ({"max_backoff": 7 * 86_400 + 1}, "retry.max_backoff"),
        ({"jitter": -0.1}, "retry.jitter"),
        ({"jitter": 1.5}, "retry.jitter"),
        ({"jitter": None}, "retry.jitter"),
        ({"retry_on": (42,)}, "retry.retry_on"),
        ({"retry_on": ("",)}, "retry.retry_on"),
        ({"retry_on": (int,)}, "retry.retry_on"),
    ],
)
def test_a_bad_field_is_named(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        RetryPolicy(**arguments)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert caught.value.kind == "store_invalid"


def test_bounds_are_accepted_and_numbers_become_floats() -> None:
    policy = RetryPolicy(
        max_attempts=1000, backoff=0, multiplier=1, max_backoff=7 * 86_400, jitter=1
    )
    assert (policy.backoff, policy.multiplier, policy.jitter) == (0.0, 1.0, 1.0)
    assert isinstance(policy.backoff, float)
    assert RetryPolicy(max_attempts=1, jitter=0).max_attempts == 1


def test_retry_on_keeps_names_and_names_classes() -> None:
    policy = RetryPolicy(retry_on=[ValueError, Flaky, "billing.errors.Timeout"])
    assert policy.retry_on == (
        "ValueError",  # builtins go by their bare name
        f"{__name__}.Flaky",
        "billing.errors.Timeout",
    )


def test_without_retry_on_every_exception_retries_until_the_last_attempt() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert policy.retries(RuntimeError("x"), 1)
    assert policy.retries(Flaky(), 2)
    assert not policy.retries(RuntimeError("x"), 3)
    assert not policy.retries(RuntimeError("x"), 4)


def test_a_base_exception_that_is_no_exception_does_not_retry() -> None:
    assert not RetryPolicy().retries(KeyboardInterrupt(), 1)


@pytest.mark.parametrize(
    "retry_on",
    [(), (OutcomeUnknown,), ("OutcomeUnknown",), ("Exception",), (Exception,)],
)
def test_outcome_unknown_never_retries(retry_on: tuple[Any, ...]) -> None:
    assert not RetryPolicy(max_attempts=10, retry_on=retry_on).retries(OutcomeUnknown("?"), 1)


@pytest.mark.parametrize(
    ("retry_on", "error", "expected"),
    [
        ((ValueError,), ValueError("x"), True),
        (("ValueError",), UnicodeError("subclass of ValueError"), True),
        ((ValueError,), TypeError("x"), False),
        ((Flaky,), Flaky(), True),
        ((Flaky,), VeryFlaky(), True),  # subclasses match
        ((VeryFlaky,), Flaky(), False),  # superclasses do not
        (("Flaky",), VeryFlaky(), True),  # a bare name
        ((f"{__name__}.Flaky",), VeryFlaky(), True),  # a dotted name
        (("elsewhere.Flaky",), Flaky(), False),  # another module's Flaky
        (("ValueError", Flaky), Flaky(), True),
    ],
)
def test_retry_on_matches_names_classes_and_subclasses(
    retry_on: tuple[Any, ...], error: BaseException, expected: bool
) -> None:
    assert RetryPolicy(retry_on=retry_on).retries(error, 1) is expected


def test_retry_on_still_stops_at_max_attempts() -> None:
    assert not RetryPolicy(max_attempts=2, retry_on=(Flaky,)).retries(Flaky(), 2)


def test_delay_grows_exponentially_up_to_the_cap() -> None:
    policy = RetryPolicy(backoff=1, multiplier=2, max_backoff=10, jitter=0)
    assert [policy.delay(n) for n in range(0, 7)] == [1, 1, 2, 4, 8, 10, 10]
    assert policy.delay(1000) == 10


def test_no_backoff_is_no_wait() -> None:
    assert RetryPolicy(backoff=0, jitter=1).delay(5, random.Random(1)) == 0


def test_jitter_spreads_within_its_fraction_and_never_past_the_cap() -> None:
    policy = RetryPolicy(backoff=4, multiplier=3, max_backoff=100, jitter=0.25)
    rng = random.Random(20240611)
    for attempts in (1, 2, 3, 4, 5, 8):
        base = min(100, 4 * 3 ** (attempts - 1))
        delays = [policy.delay(attempts, rng) for _ in range(200)]
        assert all(base * 0.75 <= d <= min(100, base * 1.25) for d in delays)
        assert len(set(delays)) > 1  # it does spread
    assert max(policy.delay(8, rng) for _ in range(200)) <= 100


def test_a_seeded_generator_gives_the_same_delays() -> None:
    policy = RetryPolicy(jitter=0.5)
    first = [policy.delay(n, random.Random(7)) for n in range(1, 6)]
    again = [policy.delay(n, random.Random(7)) for n in range(1, 6)]
    assert first == again


def test_delay_is_capped_even_when_the_growth_overflows_a_float() -> None:
    policy = RetryPolicy(max_attempts=1000, multiplier=100, max_backoff=60, jitter=0)
    assert policy.delay(200) == 60


def test_json_round_trip() -> None:
    policy = RetryPolicy(
        max_attempts=5,
        backoff=0.5,
        multiplier=3,
        max_backoff=120,
        jitter=0.2,
        retry_on=(Flaky, "ValueError"),
    )
    data = policy.to_json()
    assert data == {
        "max_attempts": 5,
        "backoff": 0.5,
        "multiplier": 3.0,
        "max_backoff": 120.0,
        "jitter": 0.2,
        "retry_on": [f"{__name__}.Flaky", "ValueError"],
    }
    assert RetryPolicy.from_json(data) == policy
    assert RetryPolicy.from_json(RetryPolicy().to_json()) == RetryPolicy()


def test_from_json_fills_missing_keys_with_defaults() -> None:
    assert RetryPolicy.from_json({"max_attempts": 2}) == RetryPolicy(max_attempts=2)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([], "retry_policy"),
        (None, "retry_policy"),
        ({"max_attempts": 2, "tries": 3}, "retry_policy"),
        ({"max_attempts": 0}, "retry.max_attempts"),
        ({"retry_on": [7]}, "retry.retry_on"),
    ],
)
def test_from_json_rejects_what_it_cannot_trust(data: Any, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        RetryPolicy.from_json(data)
    assert caught.value.field == field
