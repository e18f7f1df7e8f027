"""The error tree callers catch: one root, a closed set of kinds."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

ErrorKind = Literal[
    "store_unavailable",
    "store_invalid",
    "claim_unavailable",
    "execution_failed",
    "settlement_rejected",
    "wake_unavailable",
    "liveness_unavailable",
]

ERROR_KINDS: frozenset[str] = frozenset(ErrorKind.__args__)  # type: ignore[attr-defined]


class WatchdogError(Exception):
    """A watchdog operation could not be carried out; ``kind`` says which way it failed."""

    kind: ErrorKind

    def __init__(
        self,
        message: str = "",
        *,
        kind: ErrorKind = "store_unavailable",
        job_id: str | None = None,
    ) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown WatchdogError kind {kind!r}")
        self.kind = kind
        self.job_id = job_id
        text = message or f"Watchdog {kind.replace('_', ' ')}"
        if job_id is not None and job_id not in text:
            text = f"{text} (job {job_id!r})"
        super().__init__(text)


class InvalidInput(WatchdogError, ValueError):
    """``field`` of a public call was rejected; nothing was written."""

    def __init__(self, field: str, problem: str) -> None:
        self.field = field
        self.problem = problem
        super().__init__(f"{field}: {problem}", kind="store_invalid")


class JobConflict(WatchdogError):
    """A job with this id exists with different ``fields``; nothing was written."""

    def __init__(self, job_id: str, fields: Iterable[str]) -> None:
        self.fields = tuple(fields)
        super().__init__(
            f"job {job_id!r} already exists with a different {', '.join(self.fields)}",
            kind="store_invalid",
            job_id=job_id,
        )


class OutcomeUnknown(Exception):  # noqa: N818 - public name fixed by the contract
    """Raised by a handler: the effect may or may not have happened; never retried."""
