"""Small charts as inline SVG, written on the server: no script, no stylesheet, no network.

Each chart is one ``<svg role="img">`` with an ``aria-label`` that says what it shows, and a
``<title>`` on every bar (the browser shows it on hover). Every label goes through
``format_html``, so a lane or worker name is always text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from ..ops.activity import Bucket

#: Fill colours: settled outcomes, backlog, capacity.
COMPLETED, FAILED, CANCELLED = "#2e8540", "#c62828", "#9e9e9e"
TRACK = "#e0e0e0"


def _number(value: float) -> str:
    """A coordinate, short: ``12``, ``3.5``."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def throughput(
    buckets: Sequence[Bucket],
    *,
    step: timedelta,
    label: str,
    time_format: str,
    peak: int | None = None,
    width: int = 240,
    height: int = 48,
) -> SafeString:
    """Stacked bars, one per bucket: completed (green), failed (red), cancelled (grey).

    ``peak`` is the total the full height stands for (so charts side by side share a scale);
    by default the busiest bucket of ``buckets``. An empty bucket draws a hairline.
    """
    top = max(peak or 0, max((b.total for b in buckets), default=0), 1)
    slot = width / max(len(buckets), 1)
    bar = max(slot - 2, 1)
    rects = []
    for index, bucket in enumerate(buckets):
        x = index * slot + 1
        tip = format_html(
            "{} – {} UTC: {} completed, {} failed, {} cancelled",
            bucket.start.strftime(time_format),
            (bucket.start + step).strftime(time_format),
            bucket.completed,
            bucket.failed,
            bucket.cancelled,
        )
        y = float(height)
        parts = []
        for count, colour, kind in (
            (bucket.completed, COMPLETED, "completed"),
            (bucket.failed, FAILED, "failed"),
            (bucket.cancelled, CANCELLED, "cancelled"),
        ):
            if not count:
                continue
            tall = max(count / top * (height - 1), 1.0)
            y -= tall
            parts.append(
                format_html(
                    '<rect class="{}" x="{}" y="{}" width="{}" height="{}" fill="{}"/>',
                    kind,
                    _number(x),
                    _number(y),
                    _number(bar),
                    _number(tall),
                    colour,
                )
            )
        if not parts:
            parts.append(
                format_html(
                    '<rect class="empty" x="{}" y="{}" width="{}" height="1" fill="{}"/>',
                    _number(x),
                    height - 1,
                    _number(bar),
                    TRACK,
                )
            )
        rects.append(
            format_html(
                "<g><title>{}</title>{}</g>", tip, format_html_join("", "{}", ((p,) for p in parts))
            )
        )
    total = sum(b.total for b in buckets)
    failed = sum(b.failed for b in buckets)
    return format_html(
        '<svg class="watchdog-chart watchdog-throughput" role="img" aria-label="{}" '
        'data-settled="{}" data-failed="{}" width="{}" height="{}" viewBox="0 0 {} {}" '
        'xmlns="http://www.w3.org/2000/svg">{}</svg>',
        f"{label}: {total} settled, {failed} failed",
        total,
        failed,
        width,
        height,
        width,
        height,
        format_html_join("", "{}", ((r,) for r in rects)),
    )


@dataclass(frozen=True, kw_only=True)
class Meter:
    """One horizontal bar: ``value`` of ``scale``, drawn in ``colour``, with a text beside it."""

    value: float
    colour: str
    text: str


def meter(
    parts: Sequence[Meter], *, scale: float, label: str, width: int = 200, height: int = 14
) -> SafeString:
    """Horizontal bars laid end to end on a grey track that stands for ``scale``."""
    scale = max(scale, sum(p.value for p in parts), 1e-9)
    x = 0.0
    rects = []
    for part in parts:
        if part.value <= 0:
            continue
        wide = max(part.value / scale * width, 1.0)
        rects.append(
            format_html(
                '<rect x="{}" y="0" width="{}" height="{}" fill="{}"><title>{}</title></rect>',
                _number(x),
                _number(wide),
                height,
                part.colour,
                part.text,
            )
        )
        x += wide
    return format_html(
        '<svg class="watchdog-chart watchdog-meter" role="img" aria-label="{}" width="{}" '
        'height="{}" viewBox="0 0 {} {}" xmlns="http://www.w3.org/2000/svg">'
        '<rect width="{}" height="{}" fill="{}"/>{}</svg>',
        label,
        width,
        height,
        width,
        height,
        width,
        height,
        TRACK,
        format_html_join("", "{}", ((r,) for r in rects)),
    )
