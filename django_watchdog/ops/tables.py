"""Plain-text tables and durations for the operator command's output."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import timedelta

from django.utils.dateparse import parse_duration

from ..domain import validation
from ..domain.errors import InvalidInput

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_SHORT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, empty: str = "") -> str:
    """Left-aligned columns separated by two spaces; ``empty`` when there are no rows."""
    cells = [[str(value) for value in row] for row in rows]
    if not cells and empty:
        return f"  ({empty})"
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(value)) for w, value in zip(widths, row, strict=True)]
    lines = [headers, *cells]
    return "\n".join(
        "  " + "  ".join(value.ljust(w) for value, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )


def ago(seconds: float | None) -> str:
    """``seconds`` for a human: ``-``, ``850ms``, ``42s``, ``7m12s``, ``3h05m``, ``2d04h``."""
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w``, plain seconds, or ISO 8601 (``P3D``).

    Raises ``ValueError`` naming the accepted forms; the age must be positive and at most
    1,000 years (``validation.age``), so ``now - age`` is a date.
    """
    match = _SHORT.match(text)
    if match:
        age: timedelta | float = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    else:
        parsed = parse_duration(text.strip())
        if parsed is None:
            raise ValueError(
                f"{text!r} is not a duration: use e.g. 30d, 12h, 90m, 45s, 2w, "
                "a number of seconds, or ISO 8601 such as P3D"
            )
        age = parsed
    try:
        return validation.age(age, "age")
    except InvalidInput as error:
        raise ValueError(f"{text!r}: {error.problem}") from error
