"""One dialect per database: every statement the store runs, by name, in one module each.

``dialect(using)`` is the only place the store asks which database it talks to. A new
database is a new module here (a ``Dialect`` subclass with the same statements and
methods) and one line in ``DIALECTS``; the verb modules do not change.
"""

from __future__ import annotations

import importlib
from functools import cache

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .base import (
    WAKE_EVERY_LANE,
    Dialect,
    LaneTerms,
    QuietLanes,
    in_clause,
    lane_predicate,
    lane_terms,
)

__all__ = [
    "DIALECTS",
    "Dialect",
    "QuietLanes",
    "UnsupportedDatabase",
    "WAKE_EVERY_LANE",
    "dialect",
    "in_clause",
    "supported",
    "lane_predicate",
    "lane_terms",
    "LaneTerms",
]

#: ``connection.vendor`` → the dialect's class, as ``module:Class`` (imported on first use:
#: the PostgreSQL one needs psycopg, the MariaDB one mysqlclient).
DIALECTS = {
    "sqlite": "django_watchdog.store.dialects.sqlite:SqliteDialect",
    "postgresql": "django_watchdog.store.dialects.postgres:PostgresDialect",
    # Django's MySQL backend; the refusal (``supported_databases``) admits MariaDB 10.6+ only.
    "mysql": "django_watchdog.store.dialects.mariadb:MariadbDialect",
}


class UnsupportedDatabase(LookupError):
    """The alias's database has no dialect: watchdog cannot run on it."""


def dialect(using: str) -> Dialect:
    """The dialect of the database behind ``using``, bound to that alias."""
    return _dialect(using, connections[using].vendor)


def supported(using: str) -> bool:
    """Whether the database behind ``using`` has a dialect."""
    return dialect_class(connections[using]) is not None


def dialect_class(connection: BaseDatabaseWrapper) -> type[Dialect] | None:
    """The dialect class for ``connection``'s database (any connection, even one Django
    opens without an alias, as to create a test database); ``None`` if it has none.

    The one place the store asks which database it talks to.
    """
    path = DIALECTS.get(connection.vendor)
    if path is None:
        return None
    module, _, name = path.partition(":")
    cls: type[Dialect] = getattr(importlib.import_module(module), name)
    return cls


@cache
def _dialect(using: str, vendor: str) -> Dialect:
    cls = dialect_class(connections[using])
    if cls is None:
        raise UnsupportedDatabase(f"no watchdog dialect for {vendor!r} (database {using!r})")
    return cls(using)
