"""MariaDB's spellings, shared by its dialect modules: the clock, the id counter, booleans,
the reserved ``delayed``, the job columns, statements without ``RETURNING``, bounded lock
waits, many values sent as one JSON document, and the server's error numbers."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ...domain.validation import IDENTIFIER_MAX
from .. import waits
from . import common

NOW = "UTC_TIMESTAMP(6)"
#: The next value of the one counter job ids and places in a queue's order are drawn from
#: (migration 0011), as PostgreSQL's id sequence: enqueue and promotion order agree. Like
#: PostgreSQL's, it is not rolled back with its transaction: gaps are fine.
NEXT_ID = "NEXT VALUE FOR watchdog_job_id_seq"
DUPLICATE_KEY = 1062
#: ``innodb_lock_wait_timeout`` ran out (``waits``).
LOCK_WAIT_TIMEOUT = 1205
#: InnoDB rolled the whole transaction back to end a deadlock (``store.deadlocks``).
DEADLOCK = 1213


#: A queue's name as the queue table holds it (``utf8mb4_nopad_bin``, migration 0009), for
#: a name read from JSON: a join on it probes the table's key with nothing to check after.
QUEUE_NAME = f"VARCHAR({IDENTIFIER_MAX}) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"


def quoted(column: str) -> str:
    """``column`` (maybe ``alias.column``) with ``delayed``, a reserved word, quoted."""
    alias, dot, name = column.rpartition(".")
    return f"{alias}{dot}`{name}`" if name == "delayed" else column


def is_set(column: str) -> str:
    return f"{quoted(column)} = TRUE"


def is_unset(column: str) -> str:
    return f"{quoted(column)} = FALSE"


def job_columns(alias: str = "") -> str:
    """Every job column (``common.JOB_COLUMNS``), quoted, optionally qualified."""
    prefix = f"{alias}." if alias else ""
    return ", ".join(f"{prefix}`{column}`" for column in common.JOB_COLUMNS)


def without_returning(statement: str) -> str:
    """A ``common`` update without its ``RETURNING`` clause (MariaDB has none on UPDATE)."""
    return statement[: statement.rindex("RETURNING")]


def bounded(sql: str) -> tuple[str, dict[str, float]]:
    """``sql`` bounded to ``waits.limit()`` seconds in a bounded block (``waits``)."""
    seconds = waits.limit()
    if seconds is None:
        return sql, {}
    limit = max(0.001, round(seconds, 3))
    return f"SET STATEMENT max_statement_time = %(max_statement_time)s FOR {sql}", {
        "max_statement_time": limit
    }


def from_json(document: str, columns: Sequence[tuple[str, str]]) -> str:
    """The rows of the JSON array of arrays ``document`` (an expression), in array order, as
    a table of ``columns`` ((name, SQL type) in array order) named ``j``. A JSON null reads
    as NULL, ``true`` and ``false`` as 1 and 0; a parameter of a batch's values, whatever
    their number, is one string for the driver to quote, where each value as a parameter of
    its own cost the client more than the server's whole insert."""
    typed = ", ".join(
        f"{quoted(name)} {kind} PATH '$[{n}]'" for n, (name, kind) in enumerate(columns)
    )
    return f"JSON_TABLE({document}, '$[*]' COLUMNS ({typed})) AS j"


def one_name_rows(names: Sequence[str]) -> str:
    """``names`` as ``from_json``'s document of one column."""
    return json.dumps([[name] for name in names], ensure_ascii=False)


def error_code(error: BaseException) -> int | None:
    """The server's error number behind a Django database error."""
    cause = error.__cause__ or error
    args = getattr(cause, "args", ())
    return args[0] if args and isinstance(args[0], int) else None


#: How ``common`` orders a queue's jobs, and MariaDB's order: ties of position broken by id.
#: Positions drawn from ``NEXT_ID`` never tie; rows placed before migration 0011 may (a due
#: delayed job then took the highest id so far plus one, which a job enqueued after it could
#: take as its id): the promoted job, with the lower id, stays first.
COMMON_ORDER = "ORDER BY priority DESC, position ASC"
ORDER = "ORDER BY priority DESC, position ASC, id ASC"


def in_id_order(statement: str) -> str:
    """A ``common`` statement that orders a queue's jobs, with position ties broken by id."""
    assert COMMON_ORDER in statement  # noqa: S101 - a fragment's text changed: fail at import
    return statement.replace(COMMON_ORDER, ORDER)
