"""A stored instant Python cannot hold (outside years 1–9999), read as the nearest one it
can, marked unreadable (see ``store.timestamps``, which loads such values)."""

from __future__ import annotations

from datetime import UTC, datetime


class UnreadableTimestamp(datetime):
    """A stored instant outside years 1–9999: the nearest one Python holds (``datetime.max``
    or ``datetime.min`` in UTC); ``stored`` is the database's text for it."""

    stored: str

    @classmethod
    def of(cls, stored: str, *, too_large: bool) -> UnreadableTimestamp:
        nearest = datetime.max if too_large else datetime.min
        value = cls.combine(nearest.date(), nearest.time(), tzinfo=UTC)
        value.stored = stored
        return value
