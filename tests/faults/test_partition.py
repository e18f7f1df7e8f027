"""A worker on another host cut off by the network mid-job, then healed (SPEC §9 rule 16).

Worker P runs in its own network namespace and UTS namespace (host name ``wdw-other``: for
the others it is another machine, whose pid they cannot check). It reaches the database
server (PostgreSQL or MariaDB) over a veth pair through a TCP forwarder on the host side, so
when the link goes down the server keeps P's sessions, as it does for a real partition. When
cut, P runs a job of ``cut-q`` and its main loop sits inside a claim transaction holding
``stall-q``'s lock.

Worker B, on this host, must keep draining: other queues at once, the job P was claiming
once the server ends P's idle transaction (``IDLE_IN_TRANSACTION_TIMEOUT``; without it,
``stall-q`` stays locked as long as the server keeps P's session), and P's running job once
P's heartbeat is ``WORKER_TIMEOUT`` old. Healed, P's late settle of that job is refused
(``conflict``, logged) and nothing is lost.
"""

import os
import shutil
import signal
import subprocess
import sys

import pytest
from django.db import connection

import django_watchdog as wd
from django_watchdog.models import Job, Worker
from tests.acceptance.conftest import ROOT, WorkerProcess, wait_until
from tests.acceptance.proxy import CuttableProxy, reaching, server_address

pytestmark = [
    pytest.mark.faults,
    pytest.mark.server_only,
    pytest.mark.django_db(transaction=True),
]

SETTINGS = "tests.faults.wait_settings"


def _require_namespaces():
    if os.geteuid() != 0:
        pytest.skip("needs root (ip netns, unshare --uts)")
    for tool in ("ip", "unshare", "hostname"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool!r} on PATH")


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Link:
    """A network namespace joined to this host by a veth pair (a /30 in 10.231.0.0/16)."""

    def __init__(self):
        tag = f"{os.getpid() % 10000:04d}"
        self.namespace = f"wdw-ns{tag}"
        self.host_end = f"wdw-h{tag}"
        self.other_end = f"wdw-n{tag}"
        third = os.getpid() % 250
        self.host_address = f"10.231.{third}.1"
        self.other_address = f"10.231.{third}.2"

    def create(self):
        _ip("netns", "add", self.namespace)
        _ip("link", "add", self.host_end, "type", "veth", "peer", "name", self.other_end)
        _ip("link", "set", self.other_end, "netns", self.namespace)
        _ip("addr", "add", f"{self.host_address}/30", "dev", self.host_end)
        _ip("link", "set", self.host_end, "up")
        inside = ("netns", "exec", self.namespace, "ip")
        _ip(*inside, "addr", "add", f"{self.other_address}/30", "dev", self.other_end)
        _ip(*inside, "link", "set", self.other_end, "up")
        _ip(*inside, "link", "set", "lo", "up")

    def down(self):
        _ip("link", "set", self.host_end, "down")

    def up(self):
        _ip("link", "set", self.host_end, "up")

    def remove(self):
        subprocess.run(["ip", "link", "del", self.host_end], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.namespace], capture_output=True)


def _spawn_other_host(link, port, runs, log_path, env):
    """``watchdog_worker`` inside ``link``'s namespace, host name ``wdw-other``."""
    environment = os.environ.copy()
    environment.update(
        WATCHDOG_DB_NAME=str(connection.settings_dict["NAME"]),
        WATCHDOG_TEST_LOG=str(runs.path),
        DJANGO_SETTINGS_MODULE=SETTINGS,
        PYTHONUNBUFFERED="1",
        **reaching(link.host_address, port),
        **env,
    )
    worker = [sys.executable, "-m", "django", "watchdog_worker", "--log-level", "DEBUG"]
    command = [
        *("ip", "netns", "exec", link.namespace, "unshare", "--uts"),
        *("sh", "-c", 'hostname wdw-other && exec "$@"', "sh"),
        *worker,
        *("--concurrency", "2"),
    ]
    popen = subprocess.Popen(
        command, cwd=ROOT, env=environment, stdout=log_path.open("w"), stderr=subprocess.STDOUT
    )
    return WorkerProcess(popen, log_path)


def _settled(job_id):
    job = wd.get_job(job_id)
    return job if job is not None and job.state == "settled" else None


def test_a_partitioned_worker_costs_the_others_nothing_and_its_late_settle_is_refused(
    spawn_worker, runs, tmp_path
):
    _require_namespaces()
    link = Link()
    forwarder = None
    other = None
    try:
        link.create()
        forwarder = CuttableProxy(server_address(), host=link.host_address)
        stall = tmp_path / "stall"
        stall.mkdir()
        gate = tmp_path / "gate"
        wd.enqueue(
            "cut-job", queue="cut-q", lane="t-gate", max_recoveries=1, payload={"gate": str(gate)}
        )
        other = _spawn_other_host(
            link,
            forwarder.port,
            runs,
            tmp_path / "other.log",
            {"WATCHDOG_TEST_STALL_QUEUE": "stall-q", "WATCHDOG_TEST_STALL_DIR": str(stall)},
        )
        wait_until(lambda: runs.starts("cut-job"), message="P to start cut-job")
        # P's free slot claims stall-job: its claim transaction stalls holding stall-q.
        wd.enqueue("stall-job", queue="stall-q", lane="t-record", payload={"result": "b"})
        wait_until(lambda: (stall / "stalled").exists(), message="P to stall in stall-q")

        link.down()
        for n in range(6):
            wd.enqueue(f"w{n}", queue=f"w{n}", lane="t-record", payload={"result": n})
        b = spawn_worker("--concurrency", "2", env={"DJANGO_SETTINGS_MODULE": SETTINGS})
        for job_id in [f"w{n}" for n in range(6)] + ["stall-job"]:
            job = wait_until(lambda j=job_id: _settled(j), message=f"B to run {job_id}")
            assert job.outcome == "completed", job_id
        recovered = wait_until(lambda: _settled("cut-job"), message="B to recover cut-job")
        assert (recovered.outcome, recovered.recovery_count, recovered.result) == (
            "completed",
            1,
            "run 2",
        )
        # Not before P's heartbeat was WORKER_TIMEOUT (3 s) old.
        last_beat = Worker.objects.get(host="wdw-other").heartbeat_at.timestamp()
        [rerun] = [r for r in runs.starts("cut-job") if r["recovery_count"] == 1]
        assert rerun["time"] >= last_beat + 3.0
        assert {r["pid"] for r in runs.starts() if r["job_id"] != "cut-job"} == {b.pid}

        link.up()
        (stall / "release").touch()
        gate.touch()
        wait_until(
            lambda: "event=settle_conflict job_id=cut-job" in other.output(),
            timeout=60,
            message="P's late settle of cut-job to be refused",
        )
        assert _settled("cut-job").result == "run 2", "the late settle changed nothing"

        b.signal(signal.SIGTERM)
        assert b.wait() == 0, b.output()
        other.signal(signal.SIGTERM)
        assert other.wait(timeout=60) == 0, other.output()
    finally:
        if other is not None and other.popen.poll() is None:
            other.popen.kill()
            other.popen.wait()
        if forwarder is not None:
            forwarder.close()
        link.remove()

    ran = sorted((r["job_id"], r["recovery_count"]) for r in runs.starts())
    assert ran == sorted(
        [("cut-job", 0), ("cut-job", 1), ("stall-job", 0)] + [(f"w{n}", 0) for n in range(6)]
    ), "each job ran once, and cut-job once more after its worker was cut off"
    assert set(Job.objects.values_list("outcome", flat=True)) == {"completed"}
