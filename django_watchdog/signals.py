"""Signals watchdog sends; receivers run inside the transaction that made the change."""

from django.dispatch import Signal

#: Sent with ``queue=str, head=QueueHead, settled=Job | None`` after every change to a queue,
#: inside the same transaction. A receiver may write its own rows atomically with the change;
#: if it raises, the change rolls back and the caller gets the error.
queue_changed = Signal()
