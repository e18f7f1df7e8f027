"""System checks of the WATCHDOG setting: each bad value names its check id."""

import pytest
from django.test import override_settings

from django_watchdog.checks import check_settings


def ids(watchdog):
    with override_settings(WATCHDOG=watchdog):
        return [message.id for message in check_settings()]


def test_defaults_and_an_absent_setting_pass():
    assert ids({}) == []
    with override_settings():
        from django.conf import settings

        del settings.WATCHDOG
        assert check_settings() == []


@pytest.mark.parametrize(
    ("watchdog", "expected"),
    [
        ([("BATCH", 2)], "django_watchdog.E001"),
        ({"BACH": 2}, "django_watchdog.E002"),
        ({"POLL_INTERVAL": 0}, "django_watchdog.E003"),
        ({"SHUTDOWN_GRACE": "30"}, "django_watchdog.E003"),
        ({"MAX_PAYLOAD_BYTES": 1.5}, "django_watchdog.E004"),
        ({"HEARTBEAT_INTERVAL": 10.0, "WORKER_TIMEOUT": 15.0}, "django_watchdog.E005"),
        ({"BATCH": 0}, "django_watchdog.E006"),
        ({"BATCH": 501}, "django_watchdog.E006"),
        ({"BATCH": True}, "django_watchdog.E006"),
        ({"BATCH": 4.0}, "django_watchdog.E006"),
    ],
)
def test_a_bad_value_is_reported_by_id(watchdog, expected):
    assert ids(watchdog) == [expected]


def test_good_batches_pass():
    assert ids({"BATCH": 1}) == ids({"BATCH": 500}) == []
