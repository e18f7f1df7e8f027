"""Turn raw ``watchdog_job`` rows (from ``RETURNING`` or a plain ``SELECT``) into ``Job``s.

The hot paths write with named SQL and read back the changed row in the same statement;
this applies the same converters the ORM would, so a row edited by hand still raises
``WatchdogError(kind="store_unavailable")`` (see ``Job.from_db``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from django.db import connections
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

from ..domain.as_stored import check_decodes, reading_as_stored
from ..models import Job

Converter = Callable[..., Any]


@cache
def job_fields() -> tuple[tuple[str, str], ...]:
    """(attribute name, column) of every concrete ``Job`` field, in model order."""

    return tuple((f.attname, str(f.column)) for f in Job._meta.concrete_fields)


@cache
def column_index(name: str) -> int:
    """Where the field ``name`` sits in a row of ``dialects.common.JOB_COLUMNS``."""
    return [attname for attname, _ in job_fields()].index(name)


@cache
def _converters(using: str) -> tuple[tuple[int, tuple[tuple[Converter, Any], ...]], ...]:
    """(column index, its (converter, expression) pairs) for the columns the ORM converts
    on this database; the others come from the driver as they are."""

    connection = connections[using]
    table = Job._meta.db_table
    result = []
    for index, field in enumerate(Job._meta.concrete_fields):
        col = field.get_col(table)
        steps = [*connection.ops.get_db_converters(col), *col.get_db_converters(connection)]
        if steps:
            result.append((index, tuple((step, col) for step in steps)))
    return tuple(result)


@cache
def _attnames() -> list[str]:
    return [name for name, _ in job_fields()]


@cache
def _new_fields() -> dict[str, Any]:
    defaults = {"state": "queued", "recovery_count": 0, "attempts": 0}
    return {name: defaults.get(name) for name in _attnames()}


@cache
def _converters_of(using: str) -> dict[str, tuple[tuple[Converter, Any], ...]]:
    names = _attnames()
    return {names[index]: steps for index, steps in _converters(using)}


def decode(using: str, attname: str, value: Any) -> Any:
    """One column's value from the driver, as the ORM would decode it."""
    connection = connections[using]
    for step, col in _converters_of(using).get(attname, ()):
        value = step(value, col, connection)
    return value


def new_job_builder(using: str) -> Callable[[Mapping[str, Any]], Job]:
    """What makes the ``Job`` of a new job just written, from the validated values it was
    written with: the fields it sets (by attribute name), every other field as a new
    queued job has it (NULL, zero counts, state ``queued``). Nothing to decode or check.

    Built as ``_instance`` builds a job, its ``__dict__`` made in one step; the signals'
    receivers are looked up once, here, for every job it makes.
    """
    defaults = _new_fields()
    if init_receivers_connected():
        return lambda fields: _instance(using, list({**defaults, **fields}.values()), True)

    def build(fields: Mapping[str, Any]) -> Job:
        state = ModelState()
        state.adding, state.db = False, using
        job = Job.__new__(Job)
        job.__dict__ = {**defaults, **fields, "_state": state}
        return job

    return build


def init_receivers_connected() -> bool:
    """Whether a ``pre_init`` or ``post_init`` receiver for ``Job`` is connected."""
    return bool(pre_init.has_listeners(Job) or post_init.has_listeners(Job))


def _instance(using: str, values: Sequence[Any], signalled: bool | None = None) -> Job:
    """A loaded ``Job`` from every field's value, as ``Model.from_db`` makes one.

    Without ``pre_init``/``post_init`` receivers for ``Job`` (``signalled``: looked up
    here unless the caller did, once for many rows) it is built as Django's unpickling
    builds one (the fields straight into ``__dict__``): half the time of
    ``Model.__init__``, which runs per job of every claim, settle and enqueue. With
    receivers, ``Model.__init__`` runs and sends them.
    """

    if init_receivers_connected() if signalled is None else signalled:
        job = Job(*values)  # type: ignore[misc]  # positional, as Model.from_db builds it
    else:
        job = Job.__new__(Job)
        job.__dict__.update(zip(_attnames(), values, strict=True))
        job._state = ModelState()
    job._state.adding = False
    job._state.db = using
    return job


def to_job(using: str, row: Sequence[Any], *, as_stored: bool = False) -> Job:
    """A ``Job`` from a row of ``JOB_COLUMNS``, decoded and checked as the ORM would.

    ``as_stored``: a row that does not decode loads as stored instead of raising (for a
    row a settle just wrote: its outcome stands whatever a hand edit left in other columns).
    """

    if as_stored:
        with reading_as_stored():
            return to_job(using, row)

    connection = connections[using]
    values = list(row)
    for index, steps in _converters(using):
        value = values[index]
        for step, col in steps:
            value = step(value, col, connection)
        values[index] = value
    return check_decodes(_instance(using, values))
