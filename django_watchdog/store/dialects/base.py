"""What every dialect shares: running a named statement where Django's instrumentation sees it.

A dialect is bound to one database alias. Its statements are class constants written with
named parameters (``%(name)s``, bound from a dict); the verbs call its methods and never ask
which database this is. ``Dialect.run`` is the one place a statement reaches the driver.

Instrumentation: every statement passes through the connection's ``execute_wrapper`` hooks
(APM, tracing, ``sqlcommenter``) with the statement text and its parameters, and is logged
in ``connection.queries`` whenever Django logs queries (``DEBUG``, ``CaptureQueriesContext``,
``assertNumQueries``): then it runs on Django's own cursor, as any ORM query does. Otherwise it
runs on a driver cursor of the same connection: Django's cursor wrapper costs more than a short
statement does (on SQLite it rewrites placeholders with a regular expression on every call),
and on PostgreSQL the driver's cursor prepares each statement once per connection (planning
the claim and settle statements costs ~10x their execution). Errors surface as ``django.db``
exceptions either way, a transaction marked for rollback refuses them, and the transaction
is Django's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar

from django.db import connections, transaction
from django.db.backends.utils import CursorWrapper

from . import common

if TYPE_CHECKING:
    from ..enqueue import NewJob

Params = Mapping[str, Any]
Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class QuietLanes:
    """The lanes whose heads a settle makes ready without waking a worker (``NOTIFY``):
    those the settling worker serves when it claims on in the same transaction, as it takes
    such a head, or a better job, itself. ``only`` these lanes, or, where ``every_lane_but``
    is set, every lane but those. The default wakes every lane."""

    only: tuple[str, ...] = ()
    every_lane_but: tuple[str, ...] | None = None


#: The job columns enqueue binds (``Dialect.job_values``), in insert order.
JOB_VALUE_COLUMNS = (
    "job_id", "queue", "lane", "priority", "payload", "max_recoveries", "delayed",
    "run_after", "retry_policy", "timeout", "trace_context",
)  # fmt: skip


def named_job_values(row: Sequence[Any]) -> dict[str, Any]:
    """A row of ``Dialect.job_row``, by column name (``JOB_VALUE_COLUMNS``, as long by
    construction). No ``strict=``: on Python 3.12 a keyword argument sends ``zip`` down a
    slow call, a microsecond here, where the whole dict costs half that."""
    return dict(zip(JOB_VALUE_COLUMNS, row))  # noqa: B905


#: No lane quiet: a settle by a worker that claims nothing after it wakes every lane.
WAKE_EVERY_LANE = QuietLanes()


class Dialect:
    """One database's statements and the methods that bind them, for one alias."""

    #: ``connection.vendor`` of the databases this dialect speaks to.
    vendor: ClassVar[str]
    #: The database's clock as SQL: one clock orders every job timestamp, whichever machine
    #: wrote it, and a settle always stamps before the claim it makes possible.
    NOW: ClassVar[str]
    #: How idle workers learn of new work sooner than their next poll: ``"notify"``
    #: (``notifications()``), ``"data_version"`` (``data_version()``), ``"probe"`` (a
    #: frequent ``probe_sql`` read), or ``None``.
    WAKE: ClassVar[str | None] = None
    #: Whether the driver loads ``timestamptz`` values Python cannot hold (then watchdog
    #: installs a loader that marks them unreadable: ``store.timestamps``).
    LOADS_TIMESTAMPTZ: ClassVar[bool] = False
    #: Whether ``claim_sql`` is the whole claim, so it may run in autocommit.
    ONE_STATEMENT_CLAIM: ClassVar[bool] = False

    # The statements every dialect names (a new dialect defines each, composed from
    # ``common``); those that take the partition's lane terms are functions of them.
    SETTLE: ClassVar[str]
    RETRY: ClassVar[str]
    PRIOR: ClassVar[str]
    HEAD: ClassVar[str]
    ANY_DUE: ClassVar[str]
    NEXT_DUE: ClassVar[str]
    CREATE_CLOCK: ClassVar[str]
    ADVANCE_CLOCK: ClassVar[str]
    ANY_UNPOSITIONED: ClassVar[str]
    HEARTBEAT: ClassVar[str]

    def __init__(self, using: str) -> None:
        self.using = using

    @property
    def connection(self) -> Any:
        return connections[self.using]

    # running statements

    def fetch(self, sql: str, params: Params | None = None) -> list[Row]:
        """Run one statement; the rows it returned."""
        rows: list[Row] = self.run(sql, params or {}, lambda cursor: list(cursor.fetchall()))
        return rows

    def execute(self, sql: str, params: Params | None = None) -> int:
        """Run one statement; its row count."""
        count: int = self.run(sql, params or {}, lambda cursor: int(cursor.rowcount))
        return count

    def run(self, sql: str, params: Params, read: Callable[[Any], Any]) -> Any:
        """Run ``sql`` with ``params`` and return ``read(cursor)``: the one way in."""
        connection = self.connection
        if connection.queries_logged or not self.fast_path():
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                return read(cursor)
        with connection.wrap_database_errors, self.driver_cursor(connection, sql) as raw:
            connection.validate_no_broken_transaction()
            self.send(connection, raw, sql, params)
            return read(raw)

    def send(self, connection: Any, raw: Any, sql: str, params: Params) -> None:
        """Execute ``sql`` on the driver cursor ``raw``, through the connection's
        ``execute_wrapper`` hooks."""
        if not connection.execute_wrappers:
            self._execute_on_driver(raw, sql, params, False, {})
            return
        executor: Callable[..., Any] = partial(self._execute_on_driver, raw)
        for wrapper in reversed(connection.execute_wrappers):
            executor = partial(wrapper, executor)
        context = {"connection": connection, "cursor": CursorWrapper(raw, connection)}
        executor(sql, params, False, context)

    def fetch_together(self, statements: Sequence[tuple[str, Params]]) -> list[list[Row]]:
        """Run ``statements`` in order, each once the one before has finished; the rows of
        each (none for a statement that returns none). Where ``pipelined``, they go to the
        server in one exchange. Each statement text once: a connection keeps one cursor per
        text (``driver_cursor``)."""
        return [self.run(sql, params, _rows) for sql, params in statements]

    def fetch_in_turn(self, statements: Sequence[tuple[str, Params]]) -> list[list[Row]]:
        """``fetch_together``, in one exchange only where that costs less than a round trip
        per statement, inside ``atomic()`` before its first statement as well (PostgreSQL's
        libpq pipeline); one statement after another elsewhere."""
        return Dialect.fetch_together(self, statements)

    def pipelined(self) -> bool:
        """Whether ``fetch_together`` sends its statements in one exchange."""
        return False

    def fetch_pipelined(self, statements: Sequence[tuple[str, Params]]) -> list[list[Row]]:
        """``fetch_together`` for a caller that has found it ``pipelined``: not asked again."""
        return self.fetch_together(statements)

    def fast_path(self) -> bool:
        """Whether statements may run on a driver cursor (see the module docstring)."""
        return True

    @contextmanager
    def driver_cursor(self, connection: Any, sql: str) -> Iterator[Any]:
        """A cursor of the driver on ``connection`` (Django's, opened if need be), to run
        ``sql``."""
        connection.ensure_connection()
        cursor = connection.connection.cursor()
        try:
            yield cursor
        finally:
            cursor.close()

    def _execute_on_driver(
        self, raw: Any, sql: str, params: Params, many: bool, context: Mapping[str, Any]
    ) -> Any:
        return raw.execute(sql, params)

    # values as the driver wants them

    def param_datetime(self, value: datetime | None) -> Any:
        """A datetime as this database's driver wants it (SQLite: the ORM's text form)."""
        if value is None:
            return None
        return self.connection.ops.adapt_datetimefield_value(value)

    def param_json(self, value: Any) -> Any:
        """A JSON value for a JSON column; ``None`` stays SQL NULL, as the ORM stores it."""
        if value is None:
            return None
        return self.connection.ops.adapt_json_value(value, None)

    def param_payload(self, new: NewJob) -> Any:
        """``new``'s payload for its JSON column: the text its checks made, where the
        column holds text (``param_json`` would encode the value once more)."""
        return None if new.payload is None else new.payload_json

    def job_values(self, new: NewJob, delayed: bool) -> dict[str, Any]:
        """What enqueue writes for ``new``: each job column it binds, in insert order."""
        return named_job_values(self.job_row(new, delayed))

    def job_row(self, new: NewJob, delayed: bool) -> tuple[Any, ...]:
        """``job_values``' values alone, in their order (``JOB_VALUE_COLUMNS``): a row of
        a multi-row statement. A value left unset costs no call."""
        return (
            new.job_id,
            new.queue,
            new.lane,
            new.priority,
            None if new.payload is None else self.param_payload(new),
            new.max_recoveries,
            delayed,
            None if new.run_after is None else self.param_datetime(new.run_after),
            None if new.retry is None else self.param_json(new.retry.to_json()),
            new.timeout,
            None if new.trace_context is None else self.param_json(new.trace_context),
        )

    # spelling

    @staticmethod
    def is_set(column: str) -> str:
        """``column`` (a boolean) is true, spelt as the partial indexes' predicates are."""
        return f"{column} = TRUE"

    @staticmethod
    def is_unset(column: str) -> str:
        """``column`` (a boolean) is false, spelt as the partial indexes' predicates are."""
        return f"{column} = FALSE"

    # statements every dialect composes alike

    def capped_counts_statement(self, queues: Sequence[str], cap: int) -> tuple[str, Params]:
        """One statement reading, per queue of ``queues``: (queue, state, jobs counted,
        the earliest ``enqueued_at`` among those read, queued only), each part of a state
        read up to ``cap`` jobs; its text the same whatever the number of queues."""
        raise NotImplementedError

    def heads_statement(self, queues: Sequence[str]) -> tuple[str, Params]:
        """The heads of ``queues`` in one statement, and its parameters: (queue, rank, id,
        job_id, cancellation_id, ready, lane) per queue with a head; its text the same
        whatever the number of queues."""
        raise NotImplementedError

    # statements that take a partition's lane terms (``lanes``: ``LaneTerms``, or SQL with
    # named parameters)

    def claim_sql(self, lanes: LaneTerms, limit: int) -> str:
        """Take up to ``limit`` best claimable jobs (``%(now)s``) under ``%(token)s``
        for ``%(worker_id)s``, returning their rows (the claim statement). A dialect whose
        claim can pass over a claimable job (a locked queue, a row another claim changed
        first) returns, when it took none, one row whose ``id`` is NULL if its snapshot
        showed one all the same: the caller tries again (``claims.CLAIM_ATTEMPTS``).
        ``limit`` is also bound as ``%(limit)s``, for a dialect that sends it as a value."""
        raise NotImplementedError

    def claim(self, lanes: LaneTerms, params: Params) -> list[Row]:
        """Run the claim (``claim_sql``'s parameters): the rows it took, or the one row
        with a NULL ``id`` that says it passed a claimable job over (see ``claim_sql``)."""
        return self.fetch(self.claim_sql(lanes, int(params["limit"])), params)

    def probe_sql(self, lanes: LaneTerms) -> str:
        """The idle worker's probe where ``WAKE == "probe"``: one row whose values change
        when new work may be ready. Here, whether a job of the partition could be claimed
        now (``common.any_ready``)."""
        return common.any_ready(self.is_set, lanes.predicate())

    def retry(self, params: Params) -> list[Row]:
        """Run ``RETRY`` (its parameters): the row it changed, if any."""
        return self.fetch(self.RETRY, params)

    def retry_pending_sql(self, lanes: str) -> str:
        return common.retry_pending(lanes)

    def settled_jobs_sql(self, lanes: str) -> str:
        return common.settled_jobs(lanes)

    # the steps verbs take, each the database's own way (see the dialects)

    def bound_lock_waits(self) -> None:
        """In a bounded block (``waits.bounded``), bound the caller's lock waits."""
        raise NotImplementedError

    def between_write_batches(self, held: float) -> None:
        """Between two write transactions of a long run of them (a prune's batches), the
        first of which took ``held`` seconds: let other writers in. Row locks let them in
        all along: nothing to do."""

    def lock_queue(self, queue: str) -> None:
        """Serialise every change to ``queue`` until this transaction ends."""
        raise NotImplementedError

    def lock_queues(self, queues: Sequence[str]) -> None:
        """``lock_queue`` for several, in name order (no deadlock between two callers)."""
        raise NotImplementedError

    def lock_queues_of_jobs(self, job_ids: Sequence[str]) -> None:
        """``lock_queues`` for the queues of these jobs."""
        raise NotImplementedError

    def lock_queue_of(self, job_id: str) -> str | None:
        """Lock the queue of ``job_id`` and return its name; ``None`` if no such job."""
        raise NotImplementedError

    def notify(self, lane: str) -> None:
        """Wake idle workers of ``lane`` once this transaction commits."""
        raise NotImplementedError

    def heartbeat(self, worker_id: str) -> bool:
        """Stamp the worker alive (``HEARTBEAT``) in one statement, in the caller's
        transaction or on its own (autocommit), waiting for its row's lock no longer than
        the caller's bound (``waits.bounded``); ``False`` if the row is gone."""
        return self.execute(self.HEARTBEAT, {"worker_id": worker_id}) > 0

    def settle_and_refresh(
        self, params: Params, queue: str, quiet: QuietLanes
    ) -> tuple[Row, Row | None] | None:
        """Settle (``SETTLE``'s parameters) and refresh the queue's head (waking its lane
        unless ``quiet``): the settled row and the head row (``None``: idle);
        ``None`` if the fenced update changed nothing.

        Here in two steps, ``SETTLE`` then ``refresh_head``; a dialect may do both in one
        statement."""
        changed = self.fetch(self.SETTLE, params)
        if not changed:
            return None
        return changed[0], self.refresh_head(queue)

    def settle_and_claim_alone(
        self, params: Params, quiet: QuietLanes, lanes: LaneTerms, claim_params: Params
    ) -> tuple[tuple[Row, Row | None] | None, list[Row]] | None:
        """Lock the settling job's queue, ``settle_and_refresh`` and ``claim`` in a
        transaction of the database's own, for a caller in autocommit: what each of the
        last two returned. ``None`` when this dialect cannot here: nothing was sent, and the
        steps in a transaction are the way."""
        return None

    def refresh_head(self, queue: str, entered: Sequence[int] = ()) -> Row | None:
        """The queue's head row (``HEAD``), made ready; a head displaced by one of
        ``entered`` loses its ready flag. ``None``: the queue is idle."""
        raise NotImplementedError

    def refresh_head_in_steps(
        self, queue: str, entered: Sequence[int], demote: str, mark_ready: str
    ) -> Row | None:
        """``refresh_head`` as separate statements (SQLite, MariaDB): read ``HEAD``; if a
        head of ``entered`` displaced another, ``demote`` (``%(queue)s``, ``%(id)s``) takes
        the others' ready flag; ``mark_ready`` (``%(id)s``) makes the head ready."""
        rows = self.fetch(self.HEAD, {"queue": queue})
        if not rows:
            return None
        row = rows[0]
        rank, pk, _, _, ready, _ = row
        if rank != 0:
            if pk in entered:
                self.execute(demote, {"queue": queue, "id": pk})
            if not ready:
                self.execute(mark_ready, {"id": pk})
        return row

    def enter_jobs(
        self, batch: Sequence[NewJob], delays: Sequence[bool], now: datetime
    ) -> tuple[list[Row], set[str], dict[int, bool]]:
        """Insert ``batch`` and settle its queues' heads: (id, job_id, enqueued_at, ready)
        of each row inserted (a repeated id inserts none), the queues created, and ready
        flags that changed after their rows were returned."""
        raise NotImplementedError

    def enter_job_alone(self, new: NewJob, delayed: bool, now: datetime) -> list[Row] | None:
        """Insert ``new`` and settle its queue's head in a transaction of the database's
        own, for a caller in autocommit: (id, job_id, enqueued_at, ready) of the row
        inserted, none if the id was taken (then nothing was written). ``None`` when this
        dialect cannot here: nothing was written, and ``enter_jobs`` in a transaction is
        the way."""
        return None

    def settle_many(self, rows: Sequence[tuple[Any, ...]], quiet: QuietLanes) -> list[Row]:
        """Settle each (job_id, token, outcome, reason, result, traceback) fenced by its
        token, and ready each queue's next head: the settled rows."""
        raise NotImplementedError

    def due_delayed(self, at: Any, limit: int) -> list[Row]:
        """(id, queue) of delayed jobs due at ``at`` whose queues this transaction may
        change now, due order, up to ``limit``."""
        raise NotImplementedError

    def enter_order(self, pk: int) -> int:
        """Give a due delayed job the next position; 1 if it entered its queue's order."""
        raise NotImplementedError

    def feed_clock(self) -> list[Row]:
        """The feed clock's row (its last position), held for this transaction."""
        raise NotImplementedError

    def position_rows(self, base: int, batch: int) -> int:
        """Number up to ``batch`` unpositioned, visible jobs after ``base``; how many."""
        raise NotImplementedError

    def forget_idle_queues(self, params: Params) -> int:
        """Delete up to ``%(limit)s`` task queue rows (``common.TASK_QUEUE``) that no job
        names, judged while each row is locked; how many."""
        raise NotImplementedError

    def unanalyzed_tables(self) -> list[tuple[str, bool]]:
        """Watchdog's tables the database holds no statistics of, each with whether it has
        grown enough to be worth analyzing. None where the database keeps its own (InnoDB's
        persistent statistics) or plans without them (SQLite)."""
        return []

    def analyze(self, table: str) -> bool:
        """Gather ``table``'s statistics (one of ``unanalyzed_tables``); whether it has them
        now (not where the connection's role may not analyze it)."""
        raise NotImplementedError

    def configure_session(self, values: Sequence[tuple[str, str]]) -> None:
        """Set these (parameter, value) pairs for this connection's session, if the
        database has such settings (a worker's own connections: ``store.sessions``)."""

    def build_unmigrated(self) -> None:
        """Add what the store needs that only a migration makes, to watchdog tables built
        from the models instead (migrations disabled, as ``--nomigrations`` does); nothing
        by default."""

    def row_estimate(self, sql: str, params: Sequence[Any]) -> int | None:
        """The planner's row estimate for an ORM query, if the database offers one."""
        return None

    def data_version(self) -> int:
        """(``WAKE == "data_version"``) A number that changes when another connection commits."""
        raise NotImplementedError

    def database_files(self) -> tuple[str, ...]:
        """(``WAKE == "data_version"``) The files another connection's commit writes (so a
        waker can sleep until one is written); none if unknown (an in-memory database)."""
        return ()

    def notifications(self, channel: str) -> AbstractContextManager[Any]:
        """(``WAKE == "notify"``) A connection of its own listening on ``channel``."""
        raise NotImplementedError

    # transactions

    def deadlock_victim(self, error: BaseException) -> bool:
        """Whether ``error`` says the server rolled back the whole transaction to end a
        deadlock, so the store may run a transaction it began again (``store.deadlocks``)."""
        return False

    def claim_transaction(self, *, announcing: bool) -> AbstractContextManager[Any]:
        """The transaction a claim needs (``announcing``: ``queue_changed`` has receivers):
        none where the claim is one statement (``ONE_STATEMENT_CLAIM``: atomic on its own)
        and nothing is announced with it; an idle worker claims every poll."""
        if self.ONE_STATEMENT_CLAIM and not announcing:
            return nullcontext()
        return transaction.atomic(using=self.using)


def _rows(cursor: Any) -> list[Row]:
    return list(cursor.fetchall()) if cursor.description else []


def in_clause(
    column: str, name: str, values: Sequence[str], *, negate: bool = False
) -> tuple[str, dict[str, str]]:
    """``column IN (%(name_0)s, …)`` (or ``NOT IN``) for ``values``, with its parameters."""
    names = [f"{name}_{index}" for index in range(len(values))]
    return _in(column, names, negate=negate), dict(zip(names, values, strict=True))


def _in(column: str, names: Sequence[str], *, negate: bool = False) -> str:
    placeholders = ", ".join(f"%({n})s" for n in names)
    return f"{column} {'NOT IN' if negate else 'IN'} ({placeholders})"


@dataclass(frozen=True, slots=True)
class LaneTerms:
    """A worker's lane partition as SQL on ``column``: one of the ``served`` lanes, bound
    as ``%(lane_0)s``… (none: any lane), and none of the ``excluded``, bound as
    ``%(exclude_lane_0)s``…. Only the numbers shape the text: a worker's statements keep
    one text, and a dialect may spell the partition its own way (a walk per lane)."""

    served: int = 0
    excluded: int = 0
    column: str = "j.lane"

    @property
    def served_names(self) -> list[str]:
        return [f"lane_{index}" for index in range(self.served)]

    @property
    def excluded_names(self) -> list[str]:
        return [f"exclude_lane_{index}" for index in range(self.excluded)]

    def predicate(self, served: str | None = None) -> str:
        """The partition's predicate (``1 = 1``: every lane); ``served``, where given,
        stands for the test of the served lanes."""
        clauses = []
        if self.served:
            clauses.append(served or _in(self.column, self.served_names))
        if self.excluded:
            clauses.append(_in(self.column, self.excluded_names, negate=True))
        return " AND ".join(clauses) or "1 = 1"


def lane_terms(
    lanes: Sequence[str], exclude_lanes: Sequence[str], column: str = "j.lane"
) -> tuple[LaneTerms, dict[str, str]]:
    """A partition's ``LaneTerms`` and the parameters they bind."""
    terms = LaneTerms(len(lanes), len(exclude_lanes), column)
    params = dict(zip(terms.served_names, lanes, strict=True))
    params.update(zip(terms.excluded_names, exclude_lanes, strict=True))
    return terms, params


def lane_predicate(
    column: str, lanes: Sequence[str], exclude_lanes: Sequence[str]
) -> tuple[str, dict[str, str]]:
    """SQL restricting ``column`` to a worker's lane partition, with its parameters."""
    terms, params = lane_terms(lanes, exclude_lanes, column)
    return terms.predicate(), params
