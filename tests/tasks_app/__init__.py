"""``@task`` functions for the django.tasks backend tests (backend alias "default")."""
