"""django.tasks functions run by django-tasks-db's db_worker."""

from django.tasks import task

from ..stamp import stamp


@task
def noop(t: str) -> None:
    stamp(t)
