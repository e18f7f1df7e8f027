"""A task on the queue "default", imported from the backport when it is installed (as
Wagtail 8 does), else from django.tasks."""

try:
    from django_tasks import task
except ImportError:  # pragma: no cover
    from django.tasks import task  # type: ignore[no-redef]


@task()
def index_object(pk: str) -> str:
    return pk
