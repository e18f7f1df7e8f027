"""Row locks: a task that reads an object and writes what follows from it runs in one
transaction that first locks the object's row, so a request cannot delete (or change) the
object between the task's read and its write.

Without the lock, a task that has read an object can write the object's index rows after a
request deleted the object and removed those rows (Wagtail's index tasks and its
``post_delete`` clean-up): the rows outlive the object. With it, the delete waits for the
task's transaction to commit and then removes what the task wrote; a task that starts
after the delete finds no object.

A lock function takes a call's ``args`` (a list) and ``kwargs`` (a dict), as JSON types,
and returns the queryset of the rows to lock, or ``None`` (the call runs as it would
without the option). The backend's ``OPTIONS["ROW_LOCKS"]`` maps a task's dotted path to
the dotted path of its lock function. On PostgreSQL the rows are locked with
``SELECT ... FOR NO KEY UPDATE`` (a ``DELETE`` and other updates of them wait; inserts
that reference them do not); on SQLite the transaction itself is the lock when it begins
``IMMEDIATE`` (``DATABASES[...]["OPTIONS"]["transaction_mode"]``, check
``django_watchdog.W001``), as every writer then waits for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.apps import apps
from django.db import connections, transaction
from django.db.models import Model, QuerySet

from .keys import object_named

LockFunction = Callable[[list[Any], dict[str, Any]], "QuerySet[Model] | None"]


def model_object(args: list[Any], kwargs: dict[str, Any]) -> QuerySet[Model] | None:
    """The row of the object a call ``(app_label, model_name, pk)`` names.

    The shape of Wagtail's object tasks (reference index, search index, image focal
    point), as ``keys.model_object`` reads it. ``None`` for another shape or an unknown
    model.
    """
    named = object_named(args, kwargs)
    if named is None:
        return None
    app_label, model_name, pk = named
    try:
        model = apps.get_model(app_label, model_name)
    except LookupError:
        return None
    rows: QuerySet[Model] = model._base_manager.filter(pk=pk)
    return rows


@contextmanager
def locked(rows: QuerySet[Model] | None) -> Iterator[None]:
    """Run the block in one transaction on ``rows``' database, with ``rows`` locked first.

    ``None``: run the block as it is. Rows that no longer exist lock nothing; the block
    runs all the same (the task decides what a missing object means).
    """
    if rows is None:
        yield
        return
    using = rows.db
    features = connections[using].features
    with transaction.atomic(using=using):
        if features.has_select_for_update:
            no_key = features.has_select_for_no_key_update
            # Evaluated here: the lock is held until the transaction ends.
            list(rows.select_for_update(no_key=no_key).values_list("pk", flat=True))
        yield
