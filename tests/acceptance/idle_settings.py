"""The test settings with the worker's own cadences (poll, heartbeat, liveness timeout)
left at their defaults, as a deployed idle worker runs: the tests' short ones poll 20
times a second."""

from tests.settings import *  # noqa: F403

WATCHDOG = {  # noqa: F405
    key: value
    for key, value in WATCHDOG.items()  # noqa: F405
    if key not in ("POLL_INTERVAL", "HEARTBEAT_INTERVAL", "WORKER_TIMEOUT")
}
