"""Input grammar of every public entry; each check names the field it rejects."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from .errors import InvalidInput

MAX_SAFE_INTEGER = 2**53 - 1
IDENTIFIER_MAX = 256
LANE_MAX = 64
REASON_MAX = 200
#: Longest interval a timing setting or option may hold: one year. A thread's wait
#: overflows near 292 years, and a poll or heartbeat beyond a year is a typo.
MAX_INTERVAL = 365 * 86400.0
#: Longest retention period or prune age: 1,000 years (further back than year 1 from
#: today cannot be a date at all).
MAX_AGE = timedelta(days=365_250)
LANE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,63}")


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or ``None``.

    Both databases store UTF-8 without NUL: PostgreSQL refuses a NUL in text and jsonb,
    and a lone surrogate (a str Python holds, e.g. from ``surrogateescape``) is no UTF-8
    at all, so the driver would raise its own error, or SQLite would store what cannot be
    read back.
    """
    if "\x00" in value:
        return "contains a NUL character"
    if value.isascii():  # a flag the str carries: no surrogate, nothing to encode
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        return f"contains a lone surrogate ({value[error.start]!r} at index {error.start})"
    return None


def _storable(value: str, field: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise InvalidInput(field, f"must not contain NUL or lone surrogates: {problem}")
    return value


def identifier(value: object, field: str) -> str:
    """A job id, queue name or cancellation id: a str of 1–256 characters, storable as
    UTF-8 text (no NUL, no lone surrogate)."""
    # The common case in no more calls: ASCII text holds no surrogate.
    if type(value) is str and 0 < len(value) <= IDENTIFIER_MAX and value.isascii():
        if "\x00" not in value:
            return value
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a str, not {type(value).__name__}")
    if not 1 <= len(value) <= IDENTIFIER_MAX:
        raise InvalidInput(field, f"must be 1–{IDENTIFIER_MAX} characters, got {len(value)}")
    return _storable(value, field)


def lane(value: object, field: str = "lane") -> str:
    """A lane: 1–64 of letters, digits, ``_ - . :``, starting with a letter or digit."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a str, not {type(value).__name__}")
    if LANE_PATTERN.fullmatch(value) is None:
        raise InvalidInput(
            field,
            f"{value[:80]!r} is not a lane name (1–{LANE_MAX} letters, digits or _ - . :, "
            "starting with a letter or digit)",
        )
    return value


def lanes(values: Iterable[object] | None, field: str) -> tuple[str, ...]:
    if values is None:
        return ()
    if isinstance(values, str):
        raise InvalidInput(field, "must be a list of lane names, not a str")
    return tuple(dict.fromkeys(lane(v, field) for v in values))


def integer(value: object, field: str, *, minimum: int, maximum: int = MAX_SAFE_INTEGER) -> int:
    """An int (never a bool) within ``minimum``…``maximum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(field, f"must be an int, not {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise InvalidInput(field, f"must be between {minimum} and {maximum}, got {value}")
    return value


def priority(value: object) -> int:
    if type(value) is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        return value  # the common case, without ``integer``'s call
    return integer(value, "priority", minimum=-MAX_SAFE_INTEGER)


def max_recoveries(value: object) -> int | None:
    if value is None:
        return None
    return integer(value, "max_recoveries", minimum=0)


def flag(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(field, f"must be a bool, not {type(value).__name__}")
    return value


def reason(value: object, field: str = "reason") -> str:
    """A failure reason: a str of 1–200 characters."""
    if not isinstance(value, str):
        raise InvalidInput(field, f"must be a str, not {type(value).__name__}")
    if not 1 <= len(value) <= REASON_MAX:
        raise InvalidInput(field, f"must be 1–{REASON_MAX} characters, got {len(value)}")
    return _storable(value, field)


def _check_json(value: Any, field: str, path: str, depth: int) -> None:
    if depth > 200:
        raise InvalidInput(field, f"nested deeper than 200 levels at {path}")
    if value is None or isinstance(value, bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidInput(field, f"{value!r} at {path} is not a JSON number")
        return
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            raise InvalidInput(field, f"string at {path} {problem}")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _check_json(item, field, f"{path}[{index}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidInput(field, f"key {key!r} at {path} is not a str")
            problem = text_problem(key)
            if problem is not None:
                raise InvalidInput(field, f"key at {path} {problem}")
            _check_json(item, field, f"{path}.{key}", depth + 1)
        return
    raise InvalidInput(field, f"{type(value).__name__} at {path} is not a JSON value")


def _one_shot(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """``encoder.encode``, its C encoder made once: ``JSONEncoder.encode`` makes one per
    call, two thirds of the cost of a short payload's text. It keeps no record of the
    containers it entered (a circular value would recurse without end): ``_checked_text``
    passes it only values ``_plain`` or ``_check_json`` found at most 200 levels deep."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython has it
        return encoder.encode
    chunks = make(
        None,
        encoder.default,
        json.encoder.encode_basestring_ascii,
        None,
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )
    return lambda value: "".join(chunks(value, 0))


#: Sorted keys, no spaces, no NaN.
_CANONICAL = _one_shot(json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False))
#: The same, keys in their order: as long as the canonical text, made without a sort.
_COMPACT = _one_shot(json.JSONEncoder(separators=(",", ":"), allow_nan=False))
#: A ``str``'s JSON text, as ``_one_shot``'s encoders write one (ASCII only, quoted).
_STR_TEXT: Callable[[str], str] = json.encoder.encode_basestring_ascii
#: Where the encoder's text (ASCII only) may hold a NUL or a surrogate: ``\u0000`` or
#: ``\ud800``…``\udfff``. A pair of surrogates (a character outside the BMP) and a
#: backslash before a ``u`` match too; only the full check decides those.
_MAYBE_UNSTORABLE = re.compile(r"\\u(?:0000|d[89a-f])")


def canonical_json(
    value: Any, field: str, *, max_bytes: int | None = None, cap_name: str | None = None
) -> str:
    """The canonical JSON text of ``value`` (sorted keys, no spaces): the same text for
    the same value whatever the order of its keys.

    ``cap_name`` names the setting ``max_bytes`` comes from, in the error.
    """
    return _checked_text(_CANONICAL, value, field, max_bytes, cap_name)


def compact_json(
    value: Any, field: str, *, max_bytes: int | None = None, cap_name: str | None = None
) -> str:
    """The compact JSON text of ``value``, its keys in their order: what a JSON column of
    text stores, and as long as its canonical text (what a size cap counts)."""
    return _checked_text(_COMPACT, value, field, max_bytes, cap_name)


def _checked_text(
    encode: Callable[[Any], str],
    value: Any,
    field: str,
    max_bytes: int | None,
    cap_name: str | None,
) -> str:
    """``encode``'s text of ``value`` once ``_check_json`` would pass it, walked in full
    only where a cheaper look cannot tell: a value of other types than plain ``dict``,
    ``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``, one the encoder refuses
    (NaN), or text that may hold a NUL or a surrogate. Every error names the path.

    A ``str`` (the commonest payload) is encoded by the function both encoders call for
    one, without the rest of the encoder: the same text, in one call."""
    if type(value) is str:
        text = _STR_TEXT(value)
    else:
        if not _plain(value, 0):
            _check_json(value, field, "$", 0)
        try:
            text = encode(value)
        except (TypeError, ValueError) as error:
            _check_json(value, field, "$", 0)  # names the path, where a check rejects it
            raise InvalidInput(field, f"is not JSON: {error}") from error  # 5,000 digits
    if "\\u" in text and _MAYBE_UNSTORABLE.search(text):
        _check_json(value, field, "$", 0)
    if max_bytes is not None and len(text) > max_bytes:
        where = f" ({cap_name})" if cap_name else ""
        raise InvalidInput(
            field, f"is {len(text)} bytes as JSON, over the {max_bytes}-byte cap{where}"
        )
    return text


def _plain(value: Any, depth: int) -> bool:
    """Whether ``value`` holds only plain JSON types (never a subclass, a tuple or a key
    other than a ``str``), nested at most as deep as ``_check_json`` allows. Builds no
    path: ``_check_json`` names one only for a value it rejects."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return True
    if depth >= 200:
        return False
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not _plain(item, depth + 1):
                return False
        return True
    if kind is list:
        for item in value:
            if not _plain(item, depth + 1):
                return False
        return True
    return False


def json_identity(value: Any) -> Any:
    """What two JSON values must share to be the same payload: the JSON value, with
    numbers compared as numbers.

    A number stands for the decimal it is written as (a float for its shortest repr), so
    ``1e16`` and ``10000000000000000``, ``-0.0`` and ``0``, ``1.0`` and ``1`` are one
    value, however a database hands them back (PostgreSQL's ``jsonb`` writes numbers out
    in full); two numbers that differ in any digit differ. ``true`` is not ``1``, and
    key order never matters.
    """
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, int):
        return ("number", Decimal(value))
    if isinstance(value, float):
        return ("number", Decimal(repr(value)))
    if isinstance(value, list):
        return ("list", tuple(json_identity(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, json_identity(item)) for key, item in value.items()))
    return ("other", repr(value))


def cursor(value: object) -> int:
    """Decode an opaque settled-feed cursor (or ``None``: from the start)."""
    if value is None:
        return 0
    if not isinstance(value, str):
        raise InvalidInput("after", f"must be a cursor str or None, not {type(value).__name__}")
    prefix, _, number = value.partition(":")
    # isascii(): str.isdigit() also accepts "²" and "١", which int() rejects or reads oddly.
    if prefix != "f1" or not (number.isascii() and number.isdigit()) or len(number) > 19:
        raise InvalidInput("after", f"{value[:40]!r} is not a settled-feed cursor")
    return int(number)


def encode_cursor(position: int) -> str:
    return f"f1:{position}"


def aware_datetime(value: object, field: str) -> datetime | None:
    """``None`` or a timezone-aware datetime whose UTC instant lies in years 1–9999.

    A naive datetime is ambiguous across machines. Both databases store the UTC instant;
    one outside Python's years 1–9999 (``datetime.max`` in a western zone) would be stored
    by PostgreSQL but could never be read back.
    """
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidInput(field, f"must be a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(field, "must be timezone-aware (a naive datetime is ambiguous)")
    try:
        value.astimezone(UTC)
    except OverflowError as error:
        raise InvalidInput(
            field, f"{value.isoformat()} is outside years 1–9999 in UTC ({error})"
        ) from error
    return value


def seconds(value: object, field: str, *, maximum: float = 7 * 86400) -> float | None:
    """``None`` or a positive number of seconds."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(field, f"must be a number of seconds, not {type(value).__name__}")
    if not (0 < value <= maximum) or not math.isfinite(value):
        raise InvalidInput(field, f"must be more than 0 and at most {maximum} seconds, got {value}")
    return float(value)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def interval(value: object, field: str, *, maximum: float = MAX_INTERVAL) -> float:
    """A finite number of seconds more than 0 and at most ``maximum`` (NaN, infinity, a
    negative or an overflowing number would spin, crash or never end a wait)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(field, f"must be a number of seconds, not {type(value).__name__}")
    if not (0 < value <= maximum and math.isfinite(value)):  # NaN fails the comparison
        raise InvalidInput(
            field,
            f"must be a finite number of seconds more than 0 and at most {maximum:.0f}, "
            f"got {_shown(value)}",
        )
    return float(value)


def age(value: object, field: str) -> timedelta:
    """A positive ``timedelta`` (or number of seconds) of at most ``MAX_AGE``: how far back
    a cut-off such as ``now - age`` may reach and still be a date."""
    if isinstance(value, timedelta):
        if not timedelta(0) < value <= MAX_AGE:
            raise InvalidInput(
                field, f"must be more than 0 and at most {MAX_AGE.days} days, got {value}"
            )
        return value
    return timedelta(seconds=interval(value, field, maximum=MAX_AGE.total_seconds()))
