"""MariaDB without the enqueue procedure (migration 0015): the enqueue and queue-head tests
again, inside the test's transaction, each connection sending the anonymous block the
procedure's body was copied from (``test_mariadb_enqueue_block_autocommit``: the same in
autocommit). The block and the procedure must do the same."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection

from django_watchdog.store.dialects import mariadb_enqueue

from .test_enqueue import *  # noqa: F403 - each test again, through the block
from .test_heads import *  # noqa: F403

pytestmark = [pytest.mark.mariadb_only, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def without_the_procedure(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A procedure the server does not have: the connection's first ``CALL`` fails (1305)
    and it sends the block from then on; after these tests it asks again."""
    missing = mariadb_enqueue.CALL_ENTER_JOB.replace("watchdog_enter_job", "watchdog_missing")
    monkeypatch.setattr(mariadb_enqueue, "CALL_ENTER_JOB", missing)
    yield
    connection._watchdog_without_procedure = None
