"""Retry policies: how often a failed job runs again, and how long it waits in between."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidInput, OutcomeUnknown

ExceptionSpec = type[BaseException] | str


def _qualified(kind: type[BaseException]) -> str:
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _number(value: object, name: str, *, minimum: float, maximum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(f"retry.{name}", f"must be a number, not {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise InvalidInput(f"retry.{name}", f"must be between {minimum} and {maximum}, got {value}")
    return float(value)


@dataclass(frozen=True, kw_only=True)
class RetryPolicy:
    """Run a failing job up to ``max_attempts`` times in all, waiting with exponential backoff.

    The wait before retry *n* is ``backoff * multiplier**(n-1)``, capped at ``max_backoff``,
    then spread by ±``jitter`` (a fraction). ``retry_on`` names the exception classes that
    retry (a class, or its dotted or bare name; subclasses match); empty means all.
    ``OutcomeUnknown`` never retries: the effect may have happened.
    """

    max_attempts: int = 3
    backoff: float = 1.0
    multiplier: float = 2.0
    max_backoff: float = 300.0
    jitter: float = 0.1
    retry_on: tuple[str, ...] = field(default=())

    def __init__(
        self,
        *,
        max_attempts: int = 3,
        backoff: float = 1.0,
        multiplier: float = 2.0,
        max_backoff: float = 300.0,
        jitter: float = 0.1,
        retry_on: tuple[ExceptionSpec, ...] | list[ExceptionSpec] = (),
    ) -> None:
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
            raise InvalidInput("retry.max_attempts", "must be an int")
        if not 1 <= max_attempts <= 1000:
            raise InvalidInput("retry.max_attempts", f"must be 1–1000, got {max_attempts}")
        object.__setattr__(self, "max_attempts", max_attempts)
        object.__setattr__(self, "backoff", _number(backoff, "backoff", minimum=0, maximum=86400))
        object.__setattr__(
            self, "multiplier", _number(multiplier, "multiplier", minimum=1, maximum=100)
        )
        object.__setattr__(
            self, "max_backoff", _number(max_backoff, "max_backoff", minimum=0, maximum=7 * 86400)
        )
        object.__setattr__(self, "jitter", _number(jitter, "jitter", minimum=0, maximum=1))
        names = []
        for spec in retry_on:
            if isinstance(spec, str) and spec:
                names.append(spec)
            elif isinstance(spec, type) and issubclass(spec, BaseException):
                names.append(_qualified(spec))
            else:
                raise InvalidInput("retry.retry_on", f"{spec!r} is not an exception class or name")
        object.__setattr__(self, "retry_on", tuple(names))

    def retries(self, error: BaseException, attempts: int) -> bool:
        """Whether a run that raised ``error``, after ``attempts`` runs in all, runs again."""
        if isinstance(error, OutcomeUnknown) or attempts >= self.max_attempts:
            return False
        if not self.retry_on:
            return isinstance(error, Exception)
        wanted = set(self.retry_on)
        return any(
            _qualified(kind) in wanted or kind.__name__ in wanted
            for kind in type(error).__mro__
            if issubclass(kind, BaseException)
        )

    def delay(self, attempts: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after the ``attempts``-th run failed."""
        try:
            grown = self.backoff * self.multiplier ** max(0, attempts - 1)
        except OverflowError:  # the growth passed any cap long ago
            grown = self.max_backoff
        base = min(self.max_backoff, grown)
        spread = (rng or random).uniform(-self.jitter, self.jitter)  # noqa: S311 - not crypto
        return max(0.0, min(self.max_backoff, base * (1 + spread)))

    def to_json(self) -> dict[str, Any]:
        return {
            "max_attempts": self.max_attempts,
            "backoff": self.backoff,
            "multiplier": self.multiplier,
            "max_backoff": self.max_backoff,
            "jitter": self.jitter,
            "retry_on": list(self.retry_on),
        }

    @classmethod
    def from_json(cls, data: Any) -> RetryPolicy:
        if not isinstance(data, dict):
            raise InvalidInput("retry_policy", "stored retry policy is not an object")
        known = {"max_attempts", "backoff", "multiplier", "max_backoff", "jitter", "retry_on"}
        unknown = set(data) - known
        if unknown:
            raise InvalidInput("retry_policy", f"unknown keys {sorted(unknown)}")
        arguments: dict[str, Any] = dict(data)
        arguments["retry_on"] = tuple(arguments.get("retry_on", ()))
        return cls(**arguments)
