"""``wait_settings`` for a worker the server never rids of its idle transaction (no
``IDLE_IN_TRANSACTION_TIMEOUT``): a stalled worker that holds its locks until it resumes."""

from tests.faults.wait_settings import *  # noqa: F403

WATCHDOG = {**WATCHDOG, "IDLE_IN_TRANSACTION_TIMEOUT": None}  # noqa: F405
