"""The task backend's tests need a task framework: Django 6's ``django.tasks`` or, on
Django 5.2, the ``django-tasks`` backport (the dev extra installs it)."""

import importlib.util

import django

if (
    importlib.util.find_spec("django.tasks") is None
    and importlib.util.find_spec("django_tasks") is None
):  # pragma: no cover - Django 5.2 without the backport
    collect_ignore_glob = ["test_tasks_*.py"]
    print(f"tests/glue: the task backend tests are left out on Django {django.get_version()}")
