"""Celery on the local Redis (database 15), results ignored, no events, early acks."""

import os

from celery import Celery

from ..stamp import stamp

BROKER = os.environ.get("BENCH_CELERY_BROKER", "redis://127.0.0.1:6379/15")
QUEUE = "bench"

app = Celery("bench", broker=BROKER)
app.conf.update(
    task_ignore_result=True,
    task_default_queue=QUEUE,
    task_acks_late=False,
    worker_prefetch_multiplier=16,
    worker_send_task_events=False,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)


@app.task(name="noop")
def noop(t: str) -> None:
    stamp(t)
