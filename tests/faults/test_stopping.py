"""After SIGTERM a worker claims nothing (SPEC §9 rule 18), the claim it would have made
together with a settle included: the running job finishes, the ready one is not started."""

import signal

import pytest

import django_watchdog as wd
from django_watchdog.models import Job

from ..acceptance.conftest import wait_until

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("mode", [(), ("--batch", "4")], ids=["single", "batch"])
def test_sigterm_while_a_job_runs_starts_no_other_job(spawn_worker, runs, tmp_path, mode):
    gate = tmp_path / "gate"
    wd.enqueue("running", queue="a", lane="t-gate", priority=5, payload={"gate": str(gate)})
    worker = spawn_worker("--concurrency", "1", "--shutdown-grace", "30", *mode)
    wait_until(lambda: runs.starts("running"), message="the first job to start")
    # Ready in the same partition while the first runs: only a chained claim can take it.
    wd.enqueue("ready", queue="b", lane="t-record", payload={"result": "ran"})
    worker.signal(signal.SIGTERM)
    wait_until(lambda: "SIGTERM" in worker.output(), message="the worker to get the signal")
    gate.touch()
    assert worker.wait() == 0, worker.output()

    assert wd.get_job("running").outcome == "completed"
    ready = Job.objects.get(job_id="ready")
    assert not runs.starts("ready"), worker.output()
    assert (ready.state, ready.claim_token, ready.attempts) == ("queued", None, 0)
    assert ready.ready, "still its queue's head, for the next worker"
