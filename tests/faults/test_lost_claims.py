"""A claim whose acknowledgement was lost (committed, then the connection dropped) is put
back within a heartbeat, even while the worker stays busy with another job."""

import threading

import pytest
from django.db import OperationalError, connections

import django_watchdog as wd
from django_watchdog.engine.worker import WatchdogWorker, WorkerOptions
from django_watchdog.store.worker_store import WorkerStore

from ..acceptance.conftest import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


class LosingStore(WorkerStore):
    """Commits the settle of ``lose`` and the claim made with it, then loses the answer, as
    when the connection drops between the server's commit and its reply."""

    def __init__(self, using, *, lose):
        super().__init__(using)
        self.lose = lose
        self.lost = threading.Event()

    def settle(self, job_id, claim_token, decision, **options):
        result = super().settle(job_id, claim_token, decision, **options)
        if job_id == self.lose and options.get("claim_next") and not self.lost.is_set():
            self.lost.set()
            raise OperationalError("server closed the connection unexpectedly")
        return result


def test_a_lost_claim_is_released_and_run_while_another_job_keeps_the_worker_busy():
    gate = threading.Event()

    def handle(job):
        if job.job_id == "busy":
            gate.wait(timeout=60)
        return job.job_id

    wd.enqueue("busy", queue="q-busy", lane="x-lost", priority=9)
    wd.enqueue("b", queue="q-b", lane="x-lost", priority=5)
    wd.enqueue("unseen", queue="q-unseen", lane="x-lost", priority=1)
    store = LosingStore("default", lose="b")
    options = WorkerOptions(
        concurrency=2, worker_id="w-lost", heartbeat_interval=0.5, poll_interval=0.05
    )
    worker = WatchdogWorker(options, handlers={"x-lost": handle}, store=store)

    def serve():
        try:
            worker.run()
        finally:
            connections.close_all()  # this thread's, as the worker process's exit would

    serving = threading.Thread(target=serve, name="worker under test")
    serving.start()
    try:
        wait_until(store.lost.is_set, message="b's settle to lose its claim's answer")
        assert wd.get_job("busy").state == "running"
        # Released and run again while "busy" still holds its slot: within a heartbeat.
        wait_until(
            lambda: wd.get_job("unseen").state == "settled",
            timeout=options.heartbeat_interval * 10,
            message="the unseen claim to be released and run",
        )
        unseen = wd.get_job("unseen")
        assert (unseen.outcome, unseen.result, unseen.attempts) == ("completed", "unseen", 1)
        assert wd.get_job("busy").state == "running", "the worker stayed busy throughout"
    finally:
        gate.set()
        worker.stop()
        serving.join(timeout=30)
        if worker.heart.thread is not None:  # its connection closes as it ends, within a beat
            worker.heart.thread.join(timeout=10)
    assert not serving.is_alive()
    assert wd.get_job("busy").outcome == "completed"
