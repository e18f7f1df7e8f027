"""The jobs an enqueue wrote, made from the values it wrote (as ``Model.objects.create()``
returns the caller's values) and those the database chose: id, ``enqueued_at``, ``ready``.

A bulk enqueue's results make their ``Job`` when it is first read (``WrittenResult``): a
batch read only for its statuses, or not read at all, makes none.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..domain.values import EnqueueResult
from ..models import Job
from . import rows

if TYPE_CHECKING:
    from .enqueue import NewJob

#: ``EnqueueResult``'s own slot for ``job``, where a ``WrittenResult`` keeps the ``Job``
#: it made (its ``job`` property hides the slot from attribute access).
_KEPT_JOB: Any = EnqueueResult.__dict__["job"]


class Written:
    """What one call wrote, per job id: the row's id, raw ``enqueued_at`` and ``ready``
    flag, until its ``Job`` is asked for."""

    def __init__(self, using: str, batch: Sequence[NewJob], delays: Sequence[bool]) -> None:
        self.using, self.batch, self.delays = using, batch, delays
        #: Per job id written, (id, raw ``enqueued_at``, ``ready``).
        self.rows: dict[str, tuple[int, Any, Any]] = {}
        self.build = rows.new_job_builder(using)
        #: A statement stamps its rows alike, so each distinct stamp is decoded once.
        self.stamps: dict[Any, Any] = {}

    def add(self, pk: int, job_id: str, enqueued_at: Any, ready: Any) -> None:
        self.rows[job_id] = (pk, enqueued_at, ready)

    def every_id_new(self) -> bool:
        """Whether each item of the batch wrote a row (no repeat, no id given twice)."""
        return len(self.rows) == len(self.batch)

    def job(self, index: int) -> Job:
        """The ``Job`` of the row written for the item at ``index`` of the batch (the
        first of its id), a new one at each call."""
        new, delayed = self.batch[index], self.delays[index]
        pk, enqueued_at, ready = self.rows[new.job_id]
        return self.build(
            {
                "id": pk,
                "job_id": new.job_id,
                "queue": new.queue,
                "lane": new.lane,
                "priority": new.priority,
                "payload": new.payload,
                "max_recoveries": new.max_recoveries,
                "ready": bool(ready),
                "delayed": delayed,
                "position": None if delayed else pk,
                "run_after": new.run_after,
                "retry_policy": new.retry.to_json() if new.retry else None,
                "timeout": new.timeout,
                "trace_context": new.trace_context,
                "enqueued_at": self._stamp(enqueued_at),
            }
        )

    def _stamp(self, raw: Any) -> Any:
        if raw not in self.stamps:
            self.stamps[raw] = rows.decode(self.using, "enqueued_at", raw)
        return self.stamps[raw]

    def only(self) -> Job:
        """The one job a call of one job wrote."""
        return self.job(0)

    def in_order(self) -> list[Job | None]:
        """Per item of the batch, the job written for it; ``None`` for a repeat (and for a
        later copy of an id the batch repeats)."""
        first: dict[str, int] = {}
        for index, new in enumerate(self.batch):
            first.setdefault(new.job_id, index)
        return [
            self.job(index) if new.job_id in self.rows and first[new.job_id] == index else None
            for index, new in enumerate(self.batch)
        ]

    def results(self) -> list[EnqueueResult]:
        """Per item of a batch whose every id was new, its queued result; each ``Job``
        made now if a ``pre_init``/``post_init`` receiver must see it made."""
        indexes = range(len(self.batch))
        if rows.init_receivers_connected():
            return [EnqueueResult(status="queued", job=self.job(index)) for index in indexes]
        return [WrittenResult.of(self, index) for index in indexes]


class WrittenResult(EnqueueResult):
    """A queued ``EnqueueResult`` whose ``Job`` is made from the values written when
    ``job`` is first read, then kept: the same ``Job`` at every read.

    Until then it holds the call's requests (``Written``), which a result kept unread
    keeps alive; once read, only its ``Job``. It compares, hashes, copies and pickles as
    the ``EnqueueResult`` it stands for. Made
    only where no ``pre_init``/``post_init`` receiver for ``Job`` is connected (those see
    each job made during the call, as before). When each ``Job`` was made during the
    call, a bulk enqueue into SQLite spent 14 % of its instructions on them
    (``bench.instructions``: 187,549 a job, 160,347 with results made so), and left five
    objects a job for the collector where it now leaves two (the request and the result):
    in 30 batches of 2,000 jobs, 151 collections where there were 396, one of the whole
    heap where there were three.
    """

    __slots__ = ("_written", "_index")
    _written: Written | None
    _index: int

    @classmethod
    def of(cls, written: Written, index: int) -> WrittenResult:
        """The result of the item at ``index`` of ``written``'s batch."""
        result = cls.__new__(cls)
        object.__setattr__(result, "status", "queued")
        object.__setattr__(result, "_written", written)
        object.__setattr__(result, "_index", index)
        return result

    @property
    def job(self) -> Job:
        try:
            job: Job = _KEPT_JOB.__get__(self)
        except AttributeError:
            written = self._written
            if written is None:  # another thread made it meanwhile
                job = _KEPT_JOB.__get__(self)
            else:
                job = written.job(self._index)
                _KEPT_JOB.__set__(self, job)
                object.__setattr__(self, "_written", None)  # the requests may go now
        return job

    @job.setter
    def job(self, job: Job) -> None:
        # Reached only through ``object.__setattr__`` (``EnqueueResult.__init__``,
        # unpickling, ``dataclasses.replace``): the frozen class refuses a plain set.
        _KEPT_JOB.__set__(self, job)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EnqueueResult):
            return (self.status, self.job) == (other.status, other.job)
        return NotImplemented

    __hash__ = EnqueueResult.__hash__

    def __repr__(self) -> str:
        return f"EnqueueResult(status={self.status!r}, job={self.job!r})"
