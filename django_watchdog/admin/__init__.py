"""The watchdog admin: jobs, queues and workers, read-only, with confirmed actions.

Rows change only through the store's verbs, so the database's invariants hold: nothing is
added, edited or deleted by hand. The actions call ``cancel``, ``rerun``, ``fail_lane`` and
``purge_queued``, each behind a permission and a confirmation page, and log who did what
(``LogEntry``). The job list says why each queued job waits (``waiting``).
"""

from .jobs import JobAdmin
from .queues import QueueAdmin
from .workers import WorkerAdmin

__all__ = ["JobAdmin", "QueueAdmin", "WorkerAdmin"]
