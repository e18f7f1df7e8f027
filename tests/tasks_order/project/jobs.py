"""The project's own handlers: the native default lane, and (WATCHDOG_CLASH=1) the lane
that serves the task queue "default"."""

import os

import django_watchdog as wd


@wd.handler("default")
def native_default(job: object) -> str:
    return "native"


if os.environ.get("WATCHDOG_CLASH") == "1":

    @wd.handler("task:default")
    def clash(job: object) -> str:
        return "clash"
