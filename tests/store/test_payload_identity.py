"""Payload identity is the JSON value (SPEC §4.1): numbers compare as numbers.

PostgreSQL's ``jsonb`` gives ``1e16`` back as ``10000000000000000``, ``-0.0`` as ``0`` and the
largest float as its 309 digits; SQLite keeps the text. Either way an identical repeat is a
``duplicate`` and a different number a ``JobConflict``, on both databases.
"""

from __future__ import annotations

import itertools
import math
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import django_watchdog as wd
from django_watchdog import JobConflict

pytestmark = pytest.mark.django_db

_ids = itertools.count()

FINITE = st.floats(allow_nan=False, allow_infinity=False)
ONCE = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _fresh_id() -> str:
    return f"p{next(_ids)}"


@pytest.mark.parametrize(
    "payload",
    [
        1e16,
        1e20,
        -0.0,
        sys.float_info.max,
        -sys.float_info.max,
        sys.float_info.min,
        5e-324,
        1.5e-7,
        {"n": [1e16, -0.0, 2.5]},
        10**30,
    ],
)
def test_an_identical_repeat_is_a_duplicate(payload: Any) -> None:
    first = wd.enqueue("j", queue="q", payload=payload)
    assert first.status == "queued"
    assert wd.enqueue("j", queue="q", payload=payload).status == "duplicate"
    assert wd.enqueue_many([{"job_id": "j", "queue": "q", "payload": payload}])[0].status == (
        "duplicate"
    )


@pytest.mark.parametrize(
    ("stored", "same"),
    [(1e16, 10**16), (-0.0, 0), (1.0, 1), (2.5e-3, 0.0025), ({"a": 1.0}, {"a": 1})],
)
def test_numbers_compare_as_numbers(stored: Any, same: Any) -> None:
    wd.enqueue("j", queue="q", payload=stored)
    assert wd.enqueue("j", queue="q", payload=same).status == "duplicate"


@pytest.mark.parametrize(
    ("stored", "other"),
    [
        (1e16, 1e16 + 2),
        (0.1, 0.1000000000000001),
        (10**16 + 1, 1e16),
        (True, 1),
        (0, False),
        (None, 0),
        ("1", 1),
        ([1], [1.5]),
    ],
)
def test_a_different_value_is_a_conflict(stored: Any, other: Any) -> None:
    wd.enqueue("j", queue="q", payload=stored)
    with pytest.raises(JobConflict, match="payload"):
        wd.enqueue("j", queue="q", payload=other)


@ONCE
@given(number=FINITE)
def test_every_float_round_trips_as_the_same_payload(number: float) -> None:
    job_id = _fresh_id()
    payload = {"x": number, "list": [number]}
    assert wd.enqueue(job_id, queue="q", payload=payload).status == "queued"
    assert wd.enqueue(job_id, queue="q", payload=payload).status == "duplicate"
    many = wd.enqueue_many([{"job_id": job_id, "queue": "q", "payload": payload}])
    assert many[0].status == "duplicate"
    other = math.nextafter(number, math.inf if number < sys.float_info.max else 0.0)
    with pytest.raises(JobConflict, match="payload"):
        wd.enqueue(job_id, queue="q", payload={"x": other, "list": [number]})
    with pytest.raises(JobConflict, match="payload"):
        wd.enqueue_many(
            [{"job_id": job_id, "queue": "q", "payload": {"x": number, "list": [other]}}]
        )
