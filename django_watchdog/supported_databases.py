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
- MariaDB: 10.6 (``SKIP LOCKED``; ``RETURNING`` on ``INSERT`` is 10.5), with connections at
  READ COMMITTED (``OPTIONS["isolation_level"] = "read committed"``): the store reads what
  the previous holder of a lock committed, and the API joins the caller's transaction, whose
  isolation cannot change once it has begun. Django 6 needs 10.11 and refuses older
  servers itself when it connects.
- MySQL: not supported, since it cannot be tested where watchdog is built. Any other vendor
  (Oracle, …): not supported.

Without a connection (``manage.py check`` without ``--database``) a MySQL-backend alias is
judged by its settings only: MariaDB and MySQL cannot be told apart before connecting.
"""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace

from django.db import DatabaseError, connections

#: watchdog's statements use RETURNING (SQLite 3.35) and UPDATE ... FROM (3.33).
SQLITE_MINIMUM = (3, 35, 0)
#: The SQLite library Python's sqlite3 module is linked against.
SQLITE_VERSION = sqlite3.sqlite_version_info
#: What the PostgreSQL statements need (``tcp_user_timeout`` is PostgreSQL 12).
POSTGRES_MINIMUM = (12,)
#: What the MariaDB statements need (``SKIP LOCKED`` is MariaDB 10.6).
MARIADB_MINIMUM = (10, 6)
#: The isolation the store needs on MariaDB, as Django's ``OPTIONS`` spell it.
MARIADB_ISOLATION = "read committed"


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def postgres_minimum() -> tuple[int, ...]:
    """The oldest PostgreSQL both watchdog and the installed Django accept."""
    try:
        from django.db.backends.postgresql.features import DatabaseFeatures
    except ImportError:  # no PostgreSQL driver installed: Django's floor is unknown
        return POSTGRES_MINIMUM
    return max(POSTGRES_MINIMUM, tuple(DatabaseFeatures.minimum_database_version or ()))


def mariadb_minimum() -> tuple[int, ...]:
    """The oldest MariaDB both watchdog and the installed Django accept."""
    try:
        from django.db.backends.mysql.features import DatabaseFeatures
    except ImportError:  # no MySQL driver installed: Django's floor is unknown
        return MARIADB_MINIMUM
    # Django's floor depends on the server kind: asked for a MariaDB one.
    floor = getattr(DatabaseFeatures.minimum_database_version, "func", None)
    if floor is None:
        return MARIADB_MINIMUM
    mariadb = SimpleNamespace(connection=SimpleNamespace(mysql_is_mariadb=True))
    return max(MARIADB_MINIMUM, tuple(floor(mariadb) or ()))


def supported() -> str:
    """The databases watchdog runs on, as a refusal's message ends."""
    return (
        f"PostgreSQL {_dotted(postgres_minimum())}+, SQLite {_dotted(SQLITE_MINIMUM)}+, "
        f"MariaDB {_dotted(mariadb_minimum())}+ (at READ COMMITTED; not MySQL)"
    )


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
        problem = _mysql_family(alias, connect) or _isolation(alias)
        return f"{where} {problem}. Supported: {supported()}." if problem else None
    name = getattr(connection, "display_name", vendor)
    return f"{where} is {name}, which watchdog does not support. Supported: {supported()}."


def _mysql_family(alias: str, connect: bool) -> str | None:
    """What is wrong with a MySQL-backend alias's server, if it can be told (``connect``)."""
    if not connect:
        return None
    connection = connections[alias]
    try:
        mariadb = bool(connection.mysql_is_mariadb)  # type: ignore[attr-defined]
        version = tuple(connection.mysql_version)  # type: ignore[attr-defined]
    except DatabaseError:
        return None  # the server does not answer: the worker's own start reports that
    if not mariadb:
        return f"is MySQL {_dotted(version)}, which watchdog does not support"
    if version[:2] < mariadb_minimum():
        floor = _dotted(mariadb_minimum())
        return f"is MariaDB {_dotted(version)}; watchdog needs {floor} or newer"
    return None


def _isolation(alias: str) -> str | None:
    """Why the alias's connections would not read committed rows, if they would not."""
    options = connections[alias].settings_dict.get("OPTIONS") or {}
    level = str(options.get("isolation_level") or "").lower()
    if level == MARIADB_ISOLATION:
        return None
    shown = repr(options["isolation_level"]) if level else "not set (REPEATABLE READ)"
    return (
        f"has OPTIONS['isolation_level'] {shown}; watchdog needs {MARIADB_ISOLATION!r} on MariaDB"
    )
