"""Turn raw ``watchdog_job`` rows (from ``RETURNING`` or a plain ``SELECT``) into ``Job``s.

The hot paths write with named SQL and read back the changed row in the same statement;
this applies the same converters the ORM would, so a row edited by hand still raises
``WatchdogError(kind="store_unavailable")`` (see ``Job.from_db``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from django.db import connections

if TYPE_CHECKING:
    from ..models import Job

Converter = Callable[..., Any]


@cache
def job_fields() -> tuple[tuple[str, str], ...]:
    """(attribute name, column) of every concrete ``Job`` field, in model order."""
    from ..models import Job

    return tuple((f.attname, str(f.column)) for f in Job._meta.concrete_fields)


@cache
def column_index(name: str) -> int:
    """Where the field ``name`` sits in a row of ``columns()``."""
    return [attname for attname, _ in job_fields()].index(name)


def columns(alias: str = "") -> str:
    """The column list matching ``job_fields()``, optionally qualified by a table alias."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + column for _, column in job_fields())


@cache
def expand(sql: str) -> str:
    """``sql`` with ``<COLUMNS>`` (or ``<alias.COLUMNS>``) replaced by the job column list.

    Statements are written as module constants; the column list needs the model, so it is
    filled in on first use rather than at import.
    """
    import re

    return re.sub(r"<(?:(\w+)\.)?COLUMNS>", lambda m: columns(m.group(1) or ""), sql)


@cache
def _converters(using: str) -> tuple[tuple[tuple[Converter, Any], ...], ...]:
    """Per column, the (converter, expression) pairs the ORM applies on this database."""
    from ..models import Job

    connection = connections[using]
    table = Job._meta.db_table
    result = []
    for field in Job._meta.concrete_fields:
        col = field.get_col(table)
        steps = [*connection.ops.get_db_converters(col), *col.get_db_converters(connection)]
        result.append(tuple((step, col) for step in steps))
    return tuple(result)


def to_job(using: str, row: Sequence[Any]) -> Job:
    """A ``Job`` from a row of ``columns()``, decoded as the ORM would decode it."""
    from ..models import Job

    connection = connections[using]
    values = []
    for value, steps in zip(row, _converters(using), strict=True):
        for step, col in steps:
            value = step(value, col, connection)
        values.append(value)
    return Job.from_db(using, [name for name, _ in job_fields()], values)
