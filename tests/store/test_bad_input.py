"""Bad input never corrupts (SPEC §4.14): every rejected call writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

import django_watchdog as wd
from django_watchdog import InvalidInput
from tests.unit.bad_inputs import BAD_INPUTS, call

from .helpers import claimed, snapshot, watchdog_settings

pytestmark = pytest.mark.django_db


@pytest.fixture
def populated() -> None:
    """A store with a job in every state, so a stray write would show."""
    wd.enqueue("j", queue="q", lane="a", payload={"k": 1})
    wd.enqueue("queued", queue="q", lane="a")
    wd.enqueue("other", queue="q2")
    claimed()
    wd.settled_jobs()


@pytest.mark.parametrize(("verb", "kwargs", "field"), BAD_INPUTS)
@pytest.mark.usefixtures("populated")
def test_rejected_call_writes_nothing(verb: str, kwargs: dict[str, Any], field: str) -> None:
    before = snapshot()
    with pytest.raises(InvalidInput) as caught:
        call(verb, kwargs)
    assert caught.value.field == field
    assert snapshot() == before


@pytest.mark.usefixtures("populated")
@watchdog_settings(MAX_PAYLOAD_BYTES=64)
def test_payload_over_the_cap_writes_nothing() -> None:
    before = snapshot()
    with pytest.raises(InvalidInput, match="payload"):
        wd.enqueue("big", queue="q", payload={"text": "x" * 64})
    assert snapshot() == before
    assert wd.enqueue("small", queue="q", payload={"text": "x" * 40}).status == "queued"


@pytest.mark.usefixtures("populated")
def test_bad_input_to_an_existing_job_id_is_rejected_before_the_duplicate_check() -> None:
    before = snapshot()
    with pytest.raises(InvalidInput):
        wd.enqueue("j", queue="q", lane="a", payload={"k": float("nan")})
    assert snapshot() == before
