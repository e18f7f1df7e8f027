"""The ``django.tasks`` backend's tests need Django 6's task framework; Django 5.2 has none."""

import importlib.util

import django

if importlib.util.find_spec("django.tasks") is None:  # pragma: no cover - Django 5.2
    collect_ignore_glob = ["test_tasks_*.py"]
    print(f"tests/glue: the django.tasks tests are left out on Django {django.get_version()}")
