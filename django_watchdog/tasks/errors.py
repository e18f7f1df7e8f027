"""Exception classes named in ``TaskResult.errors`` for jobs that ended without raising.

Watchdog settles some jobs without the task raising anything (a cancellation, a lost
worker, ``fail_lane``). ``TaskError.exception_class`` must name a real exception class, so
these say which ending it was.
"""


class TaskCancelled(Exception):  # noqa: N818 - reads as the state it reports
    """The job was cancelled (``django_watchdog.cancel``) before or while it ran."""


class TaskInterrupted(Exception):  # noqa: N818
    """The job's execution disappeared (its worker was lost) and it was not recovered."""


class TaskFailed(Exception):  # noqa: N818
    """Watchdog settled the job ``failed`` without the task raising (e.g. ``fail_lane``)."""


class TaskNotRegistered(LookupError):  # noqa: N818
    """A job names a module attribute that is not a ``django.tasks.Task``; it is not run."""
