"""What a probe waker counts as news: a value that appeared or changed in the probe's row,
never one that went away, nor the same row read again."""

from datetime import UTC, datetime

import pytest

from django_watchdog.engine.wakeup import is_news

SOON = datetime(2026, 1, 1, 12, tzinfo=UTC)
LATER = datetime(2026, 1, 1, 13, tzinfo=UTC)


@pytest.mark.parametrize(
    ("last", "found", "news"),
    [
        (None, (7, None), True),  # the first probe, or the first since every slot was busy
        (None, (None, SOON), True),
        (None, (None, None), False),
        (None, None, False),
        ((7, None), (7, None), False),  # still ready: another claimer holds its queue
        ((7, None), (8, None), True),  # a new best ready job
        ((7, None), (None, None), False),  # taken
        ((None, None), (None, SOON), True),  # a delayed job or a retry, the first waiting
        ((None, LATER), (None, SOON), True),  # one due sooner than the next
        ((None, SOON), (None, SOON), False),
        ((None, SOON), (None, LATER), True),  # the next one went: the worker re-reads
        ((None, SOON), (None, None), False),  # it came due (or was cancelled)
        ((7, SOON), (7, None), False),
    ],
)
def test_news_is_a_value_that_appeared_or_changed(last, found, news) -> None:
    assert is_news(found, last) is news
