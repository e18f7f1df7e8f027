"""PostgreSQL: several statements in one exchange, straight on libpq's pipeline.

psycopg's pipeline mode runs each statement through its cursor machinery (a generator per
statement, the prepared-statement bookkeeping, result queues): for the three statements
of a busy worker's job that was about three times the client CPU of the same exchange sent
on the connection's ``pgconn`` directly. ``Exchange`` does the latter, for one driver
connection and the thread that opened it: it converts and dumps each statement's
parameters as psycopg does (its ``PostgresQuery``, so values bind exactly as on a cursor),
prepares each statement text once per parameter types under a name of its own, sends the
statements and one ``Sync``, and reads every result up to the ``Sync``.

An exchange either reads its ``Sync`` or closes the connection: a connection left with
results unread would answer the next statement with an old result.
"""

from __future__ import annotations

import select
import threading
from collections.abc import Sequence
from typing import Any

from .base import Params, Row

#: Statements an exchange keeps prepared on its connection; past this many it prepares
#: afresh under new names (the old ones stay on the server until the connection closes).
KEPT_PREPARED = 128
#: A prepared statement's name: no psycopg name (``_pg3_…``) starts so.
NAME_PREFIX = "_watchdog_"


class Exchange:
    """One driver connection's statements, prepared for ``run``."""

    def __init__(self, raw: Any) -> None:
        from psycopg.adapt import Transformer

        self.raw = raw
        self.thread = threading.get_ident()
        self.transformer = Transformer(raw)
        self.prepared: dict[tuple[bytes, tuple[int, ...]], bytes] = {}
        self.named = 0

    def usable(self) -> bool:
        """In the thread that opened it, on an open connection idle between transactions:
        in autocommit, or inside ``atomic()`` before the block's first statement (psycopg
        sends its ``BEGIN`` with that statement, and until then the connection's status
        says idle: ``run`` sends that ``BEGIN`` itself, first of the exchange). Not in a
        two-phase transaction.

        Not inside a transaction under way: psycopg deallocates every prepared statement
        on any rollback (a savepoint's too), and a statement the server forgot fails the
        exchange, which inside such a transaction aborts it, past sending again."""
        from psycopg import pq

        raw = self.raw
        pgconn = raw.pgconn
        return (
            self.thread == threading.get_ident()
            and pgconn.status == pq.ConnStatus.OK
            and pgconn.pipeline_status == pq.PipelineStatus.OFF
            and pgconn.transaction_status == pq.TransactionStatus.IDLE
            and (raw.autocommit or _begins_as_psycopg(raw))
        )

    def run(self, statements: Sequence[tuple[str, Params]]) -> list[list[Row]]:
        """Every statement, then one ``Sync``, in one exchange, and their rows; the first
        error is raised (a psycopg error) once every result up to the ``Sync`` is read.

        In autocommit the statements are one implicit transaction, committed whole or
        rolled back whole by that error. Inside ``atomic()`` they begin the caller's
        transaction (with the command psycopg would have sent) and are part of it: an
        error aborts it, as a statement's own would.

        A statement the server no longer holds prepared (psycopg deallocates every one on
        a rollback; someone sent ``DEALLOCATE ALL`` or ``DISCARD ALL``) fails the exchange
        before anything is written; it is sent again once, every statement prepared
        afresh, the transaction it began rolled back first."""
        from psycopg import errors

        begin = None if self.raw.autocommit else self.raw._get_tx_start_command()
        try:
            return self._run(statements, begin)
        except errors.InvalidSqlStatementName:
            self.prepared.clear()
            if begin is not None:
                self.raw.rollback()
            return self._run(statements, begin)

    def _run(
        self, statements: Sequence[tuple[str, Params]], begin: bytes | None
    ) -> list[list[Row]]:
        with self.raw.lock:
            pgconn = self.raw.pgconn
            pgconn.enter_pipeline_mode()
            try:
                if begin is not None:
                    pgconn.send_query_params(begin, None)
                preparing = self._send(pgconn, statements, first=int(begin is not None))
                results = _read_to_sync(pgconn)
                pgconn.exit_pipeline_mode()
            except BaseException:
                self.raw.close()
                raise
        return self._answers(results, preparing, first=int(begin is not None))

    def _send(
        self, pgconn: Any, statements: Sequence[tuple[str, Params]], first: int
    ) -> list[tuple[int, tuple[bytes, tuple[int, ...]], bytes]]:
        """Send each statement (preparing those not yet prepared), their results from
        index ``first`` on; the ones prepared now, by the index of their result, with
        their key and name."""
        from psycopg import pq
        from psycopg._queries import PostgresQuery

        preparing: list[tuple[int, tuple[bytes, tuple[int, ...]], bytes]] = []
        results = first
        for sql, params in statements:
            query = PostgresQuery(self.transformer)
            query.convert(sql, params)
            key = (query.query, query.types)
            name = self.prepared.get(key)
            if name is None:
                name = self._new_name()
                pgconn.send_prepare(name, query.query, param_types=query.types)
                preparing.append((results, key, name))
                results += 1
            pgconn.send_query_prepared(
                name, query.params, param_formats=query.formats, result_format=pq.Format.TEXT
            )
            results += 1
        pgconn.pipeline_sync()
        return preparing

    def _new_name(self) -> bytes:
        if len(self.prepared) >= KEPT_PREPARED:
            self.prepared.clear()
        self.named += 1
        return f"{NAME_PREFIX}{self.named}".encode()

    def _answers(
        self,
        results: list[Any],
        preparing: list[tuple[int, tuple[bytes, tuple[int, ...]], bytes]],
        first: int,
    ) -> list[list[Row]]:
        """Each statement's rows (its results from index ``first`` on, less the prepared
        ones' ``Parse``); the first error raised. A statement counts as prepared once its
        ``Parse`` succeeded."""
        from psycopg import errors, pq

        ok = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)
        for index, key, name in preparing:
            if results[index].status == pq.ExecStatus.COMMAND_OK:
                self.prepared[key] = name
        failed = next((r for r in results if r.status not in ok), None)
        if failed is not None:
            if failed.status == pq.ExecStatus.FATAL_ERROR:
                raise errors.error_from_result(failed, encoding=self.raw.info.encoding)
            raise errors.InternalError(f"unexpected result in an exchange: {failed.status!r}")
        prepared_at = {index for index, _, _ in preparing}
        answers = [r for index, r in enumerate(results[first:], first) if index not in prepared_at]
        return [self._rows(result) for result in answers]

    def _rows(self, result: Any) -> list[Row]:
        from psycopg import pq

        if result.status != pq.ExecStatus.TUPLES_OK or not result.ntuples:
            return []
        self.transformer.set_pgresult(result)
        return list(self.transformer.load_rows(0, result.ntuples, tuple))


def _begins_as_psycopg(raw: Any) -> bool:
    """Whether an exchange can begin ``raw``'s transaction as psycopg would: with its own
    command (a private method, checked for), and no two-phase transaction."""
    return hasattr(raw, "_get_tx_start_command") and not getattr(raw, "_tpc", None)


def _read_to_sync(pgconn: Any) -> list[Any]:
    """Flush what was sent, then every result up to the pipeline's ``Sync`` (not included)."""
    from psycopg import pq

    poller = select.poll()
    poller.register(pgconn.socket, select.POLLIN)
    while pgconn.flush():
        poller.modify(pgconn.socket, select.POLLIN | select.POLLOUT)
        poller.poll()
        pgconn.consume_input()
    poller.modify(pgconn.socket, select.POLLIN)
    results: list[Any] = []
    while True:
        while pgconn.is_busy():
            poller.poll()
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:
            continue
        if result.status == pq.ExecStatus.PIPELINE_SYNC:
            return results
        results.append(result)
