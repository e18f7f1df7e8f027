"""The error tree: one root, a closed set of kinds, messages that name the field or job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import django_watchdog as wd
from django_watchdog.domain.errors import ERROR_KINDS, InvalidInput, JobConflict, WatchdogError

SPEC_KINDS = {
    "store_unavailable",
    "store_invalid",
    "claim_unavailable",
    "execution_failed",
    "settlement_rejected",
    "wake_unavailable",
    "liveness_unavailable",
}


def test_kinds_are_exactly_the_contract() -> None:
    assert ERROR_KINDS == SPEC_KINDS


@pytest.mark.parametrize("kind", sorted(SPEC_KINDS))
def test_each_kind_builds_with_a_default_message(kind: str) -> None:
    error = WatchdogError(kind=kind)  # type: ignore[arg-type]
    assert error.kind == kind
    assert str(error) == f"Watchdog {kind.replace('_', ' ')}"


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown WatchdogError kind"):
        WatchdogError(kind="store_on_fire")  # type: ignore[arg-type]


def test_default_kind_is_store_unavailable() -> None:
    assert WatchdogError("x").kind == "store_unavailable"


def test_job_id_is_named_once() -> None:
    assert str(WatchdogError("row broken", job_id="j-1")) == "row broken (job 'j-1')"
    assert str(WatchdogError("job j-1 broken", job_id="j-1")) == "job j-1 broken"
    assert WatchdogError("x", job_id="j-1").job_id == "j-1"


def test_invalid_input_names_the_field() -> None:
    error = InvalidInput("priority", "must be an int, not bool")
    assert (error.field, error.problem, error.kind) == (
        "priority",
        "must be an int, not bool",
        "store_invalid",
    )
    assert str(error) == "priority: must be an int, not bool"
    assert isinstance(error, WatchdogError) and isinstance(error, ValueError)


def test_job_conflict_names_each_differing_field() -> None:
    error = JobConflict("j", ["lane", "payload"])
    assert error.fields == ("lane", "payload")
    assert error.job_id == "j"
    assert error.kind == "store_invalid"
    assert str(error) == "job 'j' already exists with a different lane, payload"
    assert isinstance(error, WatchdogError)


def test_outcome_unknown_is_not_a_watchdog_error() -> None:
    # A handler raises it; callers that catch WatchdogError must not swallow it.
    assert not issubclass(wd.OutcomeUnknown, WatchdogError)
    assert issubclass(wd.OutcomeUnknown, Exception)


def test_public_names_are_exported() -> None:
    assert wd.WatchdogError is WatchdogError
    assert wd.InvalidInput is InvalidInput
    assert wd.JobConflict is JobConflict


def test_domain_imports_without_django() -> None:
    """The domain layer is pure Python: importing it loads no Django module."""
    code = (
        "import sys\n"
        "import django_watchdog.domain.validation, django_watchdog.domain.decisions\n"
        "import django_watchdog.domain.values, django_watchdog.domain.states\n"
        "loaded = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.'))\n"
        "assert not loaded, loaded\n"
    )
    # Import the package's domain without running django_watchdog/__init__.py's imports.
    bootstrap = (
        "import importlib.util, sys, types\n"
        f"root = {str(Path(wd.__file__).parent)!r}\n"
        "package = types.ModuleType('django_watchdog'); package.__path__ = [root]\n"
        "sys.modules['django_watchdog'] = package\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", bootstrap + code],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
