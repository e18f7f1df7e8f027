"""The fault suite: real worker processes and real servers under outages, stalls and poison.

Each test arranges its fault on purpose (a refused database, a held lock, a stopped
process, a cut link, a value the store cannot hold) and waits for conditions, never for
time. The worker fixtures are the acceptance suite's.
"""

from tests.acceptance.conftest import (  # noqa: F401 - fixtures, registered by import
    _close_connection_after,
    runs,
    spawn_worker,
)
