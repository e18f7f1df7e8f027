"""What MariaDB's ``EXPLAIN`` says in its ``rows`` column, read as a number."""

import pytest

from django_watchdog.store.dialects.mariadb import explained_rows


@pytest.mark.parametrize(
    ("shown", "rows"),
    [(5, 5), ("5", 5), ("5 (1%)", 5), ("98 (2%)", 98), ("12000 (100%)", 12000)],
)
def test_a_rowid_filters_share_beside_the_rows_is_left_out(shown: object, rows: int) -> None:
    """With a rowid filter MariaDB writes the filter's share beside the rows the access
    reads: the dashboard's lane estimate failed on it (a 500)."""
    assert explained_rows(shown) == rows
