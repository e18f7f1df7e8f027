"""How the admin shows stored data: escaped, pretty-printed JSON and text, and ages."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django.utils import dateformat, timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

EMPTY = "-"


def pretty_json(value: Any) -> SafeString:
    """``value`` as indented JSON inside ``<pre>``, HTML-escaped."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)
    return format_html('<pre class="watchdog-data">{}</pre>', text)


def pretty_text(value: str | None) -> SafeString | str:
    """Multi-line text (a traceback) inside ``<pre>``, HTML-escaped."""
    if not value:
        return EMPTY
    return format_html('<pre class="watchdog-data">{}</pre>', value)


#: Timestamps to the second, in the current time zone (the admin's default shows minutes).
TIMESTAMP_FORMAT = "Y-m-d H:i:s T"


def timestamp(value: datetime | None) -> str:
    """``value`` to the second in the current time zone: ``2026-12-01 15:04:05 UTC``."""
    if value is None:
        return EMPTY
    return dateformat.format(timezone.localtime(value), TIMESTAMP_FORMAT)


def age(since: datetime | None, now: datetime | None = None) -> str:
    """How long ago ``since`` was, in the two largest units: ``3m 12s``, ``2d 4h``."""
    if since is None:
        return EMPTY
    return duration((now or timezone.now()) - since)


def duration(delta: timedelta | float | None) -> str:
    """A span of time in the two largest units; sub-second spans in milliseconds."""
    if delta is None:
        return EMPTY
    seconds = delta.total_seconds() if isinstance(delta, timedelta) else float(delta)
    if seconds < 0:
        seconds = 0.0
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    parts: list[str] = []
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        amount, whole = divmod(whole, size)
        if amount or parts:
            parts.append(f"{amount}{unit}")
    return " ".join(parts[:2])
