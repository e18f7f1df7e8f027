"""MariaDB without the enqueue procedure, in autocommit: ``test_enqueue_autocommit`` again,
each connection sending the anonymous block (``ENTER_JOB_ALONE``)."""

from __future__ import annotations

import pytest

from .test_enqueue_autocommit import *  # noqa: F403 - each test again, through the block
from .test_mariadb_enqueue_block import without_the_procedure  # noqa: F401 - autouse

pytestmark = [pytest.mark.mariadb_only, pytest.mark.django_db(transaction=True)]
