"""Input grammar (SPEC §4.14): every public verb rejects bad input, naming the field, before
any database access (pytest-django refuses database access in these tests)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.test import override_settings

from django_watchdog import InvalidInput, WatchdogError
from django_watchdog.domain import validation
from django_watchdog.store.enqueue import NewJob

from .bad_inputs import BAD_INPUTS, MAX, call


@pytest.mark.parametrize(("verb", "kwargs", "field"), BAD_INPUTS)
def test_public_verb_rejects_bad_input_naming_the_field(
    verb: str, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        call(verb, kwargs)
    error = caught.value
    assert error.field == field
    assert str(error).startswith(f"{field}: ")
    assert error.kind == "store_invalid"
    assert isinstance(error, WatchdogError)
    assert isinstance(error, ValueError)


def _parse(**overrides: Any) -> NewJob:
    values: dict[str, Any] = {
        "queue": "q",
        "lane": "default",
        "priority": 0,
        "payload": None,
        "max_recoveries": None,
    }
    values.update(overrides)
    return NewJob.parse("j", **values)


class TestBoundaries:
    """The largest and smallest accepted values are accepted."""

    @pytest.mark.parametrize("value", [MAX, -MAX, 0, -1])
    def test_priority_in_range(self, value: int) -> None:
        assert validation.priority(value) == value

    @pytest.mark.parametrize("value", [1, 256])
    def test_identifier_lengths(self, value: int) -> None:
        assert validation.identifier("x" * value, "job_id") == "x" * value

    @pytest.mark.parametrize(
        "value", ["default", "a", "9", "l" * 64, "mail.out:eu-1_b", "A-", "x:"]
    )
    def test_lane_grammar(self, value: str) -> None:
        assert validation.lane(value) == value

    @pytest.mark.parametrize("value", [None, 0, 1, MAX])
    def test_max_recoveries(self, value: int | None) -> None:
        assert validation.max_recoveries(value) == value

    @pytest.mark.parametrize("value", ["r", "r" * 200])
    def test_reason_lengths(self, value: str) -> None:
        assert validation.reason(value) == value

    @pytest.mark.parametrize(
        "payload",
        [None, True, 0, -(2**70), 1.5, "", "\u00e9\U0001f600", [], {}, {"a": [1, {"b": None}]}],
    )
    def test_json_payloads(self, payload: Any) -> None:
        assert _parse(payload=payload).payload == payload


class TestCanonicalJson:
    def test_key_order_does_not_matter(self) -> None:
        one = validation.canonical_json({"a": 1, "b": [1, 2]}, "payload")
        two = validation.canonical_json({"b": [1, 2], "a": 1}, "payload")
        assert one == two == '{"a":1,"b":[1,2]}'

    def test_names_the_path_of_a_bad_value(self) -> None:
        with pytest.raises(InvalidInput, match=r"\$\.a\[1\]"):
            validation.canonical_json({"a": [1, math.nan]}, "payload")

    def test_names_a_non_str_key(self) -> None:
        with pytest.raises(InvalidInput, match="key 1 at"):
            validation.canonical_json({"a": {1: 2}}, "payload")

    def test_rejects_absurd_nesting(self) -> None:
        deep: Any = []
        for _ in range(300):
            deep = [deep]
        with pytest.raises(InvalidInput, match="deeper"):
            validation.canonical_json(deep, "payload")


class TestCompactJson:
    """The payload's text: the encoder's, with the checks a full walk makes, taken only
    where a cheaper look cannot decide."""

    @pytest.mark.parametrize("value", ["", "a", "\u00e9", "\U0001f600", 'a"b\\c\n', "\x01\u2028"])
    def test_a_str_has_the_text_the_encoder_gives_it_inside_a_list(self, value: str) -> None:
        # A str takes a shorter way to its text than a str inside a list: the same text.
        text = validation.compact_json(value, "payload")
        assert f"[{text}]" == validation.compact_json([value], "payload")
        assert text == validation.canonical_json(value, "payload")

    def test_keeps_the_keys_in_their_order_at_the_canonical_length(self) -> None:
        value = {"b": [1, 2.5], "a": {"d": None, "c": True}}
        text = validation.compact_json(value, "payload")
        assert text == '{"b":[1,2.5],"a":{"d":null,"c":true}}'
        assert len(text) == len(validation.canonical_json(value, "payload"))

    @pytest.mark.parametrize(
        "value",
        [
            "\U0001f600",  # a surrogate pair in the text, one character in Python
            "\\u0000 and \\udc80",  # a backslash before the letters, no NUL
            {"\u00e9": ["\x01", "\U0010ffff"]},
        ],
    )
    def test_accepts_what_only_looks_unstorable_in_the_text(self, value: Any) -> None:
        import json

        assert json.loads(validation.compact_json(value, "payload")) == value

    @pytest.mark.parametrize(
        ("value", "where"),
        [
            ({"a": ["b", "c\x00"]}, r"string at \$\.a\[1\] contains a NUL"),
            ({"a": {"\udc80": 1}}, r"key at \$\.a contains a lone surrogate"),
            ([1, {"a": (1, 2)}], r"tuple at \$\[1\]\.a is not a JSON value"),
            ({"a": [math.inf]}, r"inf at \$\.a\[0\] is not a JSON number"),
        ],
    )
    def test_names_the_path_of_what_it_rejects(self, value: Any, where: str) -> None:
        with pytest.raises(InvalidInput, match=where):
            validation.compact_json(value, "payload")

    def test_a_circular_value_is_rejected_not_recursed_into(self) -> None:
        loop: list[Any] = []
        loop.append({"again": loop})
        with pytest.raises(InvalidInput, match="deeper than 200 levels"):
            validation.compact_json(loop, "payload")

    def test_subclasses_of_json_types_are_checked_in_full_and_accepted(self) -> None:
        import enum

        class Level(enum.IntEnum):
            HIGH = 3

        class Name(str):
            pass

        assert validation.compact_json({Name("k"): [Level.HIGH]}, "payload") == '{"k":[3]}'
        with pytest.raises(InvalidInput, match="NUL"):
            validation.compact_json([Name("a\x00")], "payload")


class TestPayloadCap:
    """The cap counts bytes of canonical JSON and is read lazily from settings."""

    @override_settings(WATCHDOG={"MAX_PAYLOAD_BYTES": 12})
    def test_payload_at_the_cap_is_accepted(self) -> None:
        payload = "x" * 10  # '"xxxxxxxxxx"' is 12 characters
        assert _parse(payload=payload).payload_json == f'"{payload}"'

    @override_settings(WATCHDOG={"MAX_PAYLOAD_BYTES": 12})
    def test_payload_over_the_cap_is_rejected(self) -> None:
        with pytest.raises(InvalidInput, match="13 bytes as JSON, over the 12-byte cap") as caught:
            _parse(payload="x" * 11)
        assert caught.value.field == "payload"

    @override_settings(WATCHDOG={"MAX_PAYLOAD_BYTES": 12})
    def test_public_enqueue_rejects_it_before_the_database(self) -> None:
        import django_watchdog as wd

        with pytest.raises(InvalidInput) as caught:
            wd.enqueue("j", queue="q", payload={"key": "value!"})
        assert caught.value.field == "payload"

    def test_default_cap_is_one_mebibyte(self) -> None:
        fits = "x" * (1024 * 1024 - 2)
        assert len(_parse(payload=fits).payload_json) == 1024 * 1024
        with pytest.raises(InvalidInput):
            _parse(payload=fits + "x")


class TestCursor:
    def test_none_reads_from_the_start(self) -> None:
        assert validation.cursor(None) == 0

    @pytest.mark.parametrize("position", [0, 1, 2**62])
    def test_round_trip(self, position: int) -> None:
        assert validation.cursor(validation.encode_cursor(position)) == position

    @pytest.mark.parametrize("value", ["f1:\u0661", "f1:\u00b2", "f1: 1", "f1:1 ", "f1:1:2"])
    def test_rejects_non_canonical_digits(self, value: str) -> None:
        with pytest.raises(InvalidInput) as caught:
            validation.cursor(value)
        assert caught.value.field == "after"


def test_lanes_list_rejects_a_bare_str_and_dedupes() -> None:
    with pytest.raises(InvalidInput, match="not a str"):
        validation.lanes("abc", "lanes")
    assert validation.lanes(["a", "b", "a"], "lanes") == ("a", "b")
    assert validation.lanes(None, "lanes") == ()
    with pytest.raises(InvalidInput) as caught:
        validation.lanes(["a", "b c"], "exclude_lanes")
    assert caught.value.field == "exclude_lanes"


@pytest.mark.parametrize("value", [1, "true", None, 0])
def test_flag_needs_a_bool(value: Any) -> None:
    with pytest.raises(InvalidInput):
        validation.flag(value, "only_if_queued")


class TestJsonIdentity:
    """A payload is its JSON value: numbers compare as the decimals they are written as."""

    @pytest.mark.parametrize(
        ("one", "two"),
        [
            (1e16, 10**16),
            (-0.0, 0),
            (1.0, 1),
            (1.7976931348623157e308, 17976931348623157 * 10**292),
            (1.5e-7, 0.00000015),
            ({"a": 1, "b": [2.0]}, {"b": [2], "a": 1.0}),
        ],
    )
    def test_same_value(self, one: Any, two: Any) -> None:
        assert validation.json_identity(one) == validation.json_identity(two)

    @pytest.mark.parametrize(
        ("one", "two"),
        [
            (True, 1),
            (False, 0),
            (None, 0),
            ("1", 1),
            (10**16 + 1, 1e16),
            ([1, 2], [2, 1]),
            ({"a": 1}, {"a": 1, "b": None}),
            ([[]], [{}]),
        ],
    )
    def test_different_value(self, one: Any, two: Any) -> None:
        assert validation.json_identity(one) != validation.json_identity(two)
