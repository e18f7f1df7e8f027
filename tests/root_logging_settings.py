"""The test settings with logging as many projects configure it: one console handler on
the root logger, and no handler of watchdog's own (its records propagate to the root)."""

from tests.settings import *  # noqa: F403

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "INFO"},
}
