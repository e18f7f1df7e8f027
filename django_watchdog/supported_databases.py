"""Which databases watchdog runs on, and the message that refuses any other.

Watchdog's statements are written for PostgreSQL and SQLite; on any other database they
would run as SQLite's and misbehave, so ``manage.py check`` (``django_watchdog.E016``) and
the worker refuse it instead. The floors are what the statements need or what Django needs,
whichever is higher:

- PostgreSQL: the statements need 12 (``tcp_user_timeout``; ``SKIP LOCKED`` and
  ``ON CONFLICT`` are 9.5); Django 5.2 needs 14 and Django 6 needs 15, and refuses older
  servers itself when it connects.
- SQLite: ``RETURNING`` needs 3.35 (``UPDATE … FROM`` 3.33); ``django_watchdog.E012``
  reports an older library.
- MariaDB: not yet (its dialect is in progress). MySQL: not supported, since it cannot be
  tested where watchdog is built. Any other vendor (Oracle, …): not supported.
"""

from __future__ import annotations

import sqlite3

from django.db import DatabaseError, connections

#: watchdog's statements use RETURNING (SQLite 3.35) and UPDATE ... FROM (3.33).
SQLITE_MINIMUM = (3, 35, 0)
#: The SQLite library Python's sqlite3 module is linked against.
SQLITE_VERSION = sqlite3.sqlite_version_info
#: What the PostgreSQL statements need (``tcp_user_timeout`` is PostgreSQL 12).
POSTGRES_MINIMUM = (12,)


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def postgres_minimum() -> tuple[int, ...]:
    """The oldest PostgreSQL both watchdog and the installed Django accept."""
    try:
        from django.db.backends.postgresql.features import DatabaseFeatures
    except ImportError:  # no PostgreSQL driver installed: Django's floor is unknown
        return POSTGRES_MINIMUM
    return max(POSTGRES_MINIMUM, tuple(DatabaseFeatures.minimum_database_version or ()))


def supported() -> str:
    """The databases watchdog runs on, as a refusal's message ends."""
    return f"PostgreSQL {_dotted(postgres_minimum())}+, SQLite {_dotted(SQLITE_MINIMUM)}+"


def refusal(alias: str, *, connect: bool) -> str | None:
    """Why watchdog refuses ``DATABASES[alias]``, or ``None`` when it runs there.

    With ``connect`` the server may be asked what it is (MariaDB or MySQL, and its
    version); without it, nothing is opened and a MySQL-backend alias is refused without
    telling the two apart.
    """
    connection = connections[alias]
    vendor = connection.vendor
    where = f"DATABASES[{alias!r}]"
    if vendor == "postgresql":
        return None
    if vendor == "sqlite":
        if SQLITE_VERSION < SQLITE_MINIMUM:
            return (
                f"{where} is SQLite {_dotted(SQLITE_VERSION)}; watchdog needs "
                f"{_dotted(SQLITE_MINIMUM)} or newer. Supported: {supported()}."
            )
        return None
    if vendor == "mysql":
        return f"{where} {_mysql_family(alias, connect)}. Supported: {supported()}."
    name = getattr(connection, "display_name", vendor)
    return f"{where} is {name}, which watchdog does not support. Supported: {supported()}."


def _mysql_family(alias: str, connect: bool) -> str:
    """What a MySQL-backend alias is, as much as can be said."""
    if connect:
        connection = connections[alias]
        try:
            mariadb = bool(connection.mysql_is_mariadb)  # type: ignore[attr-defined]
            version = _dotted(tuple(connection.mysql_version))  # type: ignore[attr-defined]
        except DatabaseError:
            pass
        else:
            if mariadb:
                return f"is MariaDB {version}: MariaDB support is in progress"
            return f"is MySQL {version}, which watchdog does not support"
    return "uses the MySQL backend: MySQL is not supported and MariaDB support is in progress"
