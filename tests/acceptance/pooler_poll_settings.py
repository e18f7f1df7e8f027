"""Through PgBouncer with no direct connection for LISTEN: the worker can only poll."""

from tests.settings import *  # noqa: F403

WATCHDOG = {**WATCHDOG, "LISTEN_DATABASE": None}  # noqa: F405
