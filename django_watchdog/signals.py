"""Signals watchdog sends.

``queue_changed`` receivers run inside the transaction that made the change.
``job_started`` and ``job_finished`` are sent by the worker outside any transaction of the
store, in the thread that runs the job (``job_finished`` for an abandoned run: in the
worker's main thread). A receiver of these two that raises is logged and ignored: it never
stops the worker nor changes the job's outcome.
"""

from django.dispatch import Signal

#: Sent with ``queue=str, head=QueueHead, settled=Job | None`` after every change to a queue,
#: inside the same transaction. A receiver may write its own rows atomically with the change;
#: if it raises, the change rolls back and the caller gets the error.
queue_changed = Signal()

#: Sent by a worker just before it calls a native handler: ``sender`` is the handler
#: function, with ``job`` (what the handler receives: ``job_id``, ``queue``, ``lane``,
#: ``payload``, ...) and ``worker_id``.
job_started = Signal()

#: Sent by a worker once a job it started is settled (or its settle was refused): ``sender``
#: is the handler function, with ``job``, ``worker_id``, ``outcome`` (``"completed"``,
#: ``"failed"``, ``"retrying"``, ``"cancelled"``, ``"outcome_unknown"``; ``None`` if the
#: settle was refused because the job was settled elsewhere), ``duration`` (seconds the
#: handler ran) and ``exception`` (what the handler raised, or ``None``).
job_finished = Signal()
