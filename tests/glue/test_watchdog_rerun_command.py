"""``manage.py watchdog rerun`` and who the command records on the jobs it changes."""

import getpass
import io

import pytest
from django.core.management import CommandError, call_command

import django_watchdog as wd
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job
from django_watchdog.store.store import Store

pytestmark = pytest.mark.django_db


def watchdog(*args):
    out = io.StringIO()
    call_command("watchdog", *args, stdout=out, stdin=io.StringIO())
    return out.getvalue()


def failed(job_id):
    wd.enqueue(job_id, queue="q", payload={"n": 1})
    claim = Store().claim()
    Store().settle(job_id, claim.claim_token, Decision.failed("ValueError: x"))


def test_rerun_enqueues_a_linked_job_and_records_the_os_user():
    failed("j")
    assert watchdog("rerun", "j") == "j: re-run as j~rerun-1, queued\n"
    new = Job.objects.get(job_id="j~rerun-1")
    assert (new.rerun_of, new.payload, new.state) == ("j", {"n": 1}, "queued")
    assert new.rerun_requested_by == f"cli:{getpass.getuser()}"
    assert Job.objects.get(job_id="j").state == "settled"


def test_rerun_with_an_id_twice_reruns_once():
    failed("j")
    assert watchdog("rerun", "j", "--rerun-id", "j-again") == "j: re-run as j-again, queued\n"
    assert watchdog("rerun", "j", "--rerun-id", "j-again") == (
        "j: re-run as j-again, queued (already re-run under this id)\n"
    )
    assert Job.objects.filter(rerun_of="j").count() == 1


def test_rerun_refuses_a_job_that_is_not_settled_unsuccessfully():
    wd.enqueue("waiting", queue="q")
    with pytest.raises(CommandError, match="job 'waiting' is queued; only a settled failed"):
        watchdog("rerun", "waiting")
    with pytest.raises(CommandError, match="no job 'nobody'"):
        watchdog("rerun", "nobody")
    assert Job.objects.count() == 1


def test_cancel_records_the_os_user():
    wd.enqueue("j", queue="q")
    watchdog("cancel", "j")
    assert Job.objects.get(job_id="j").cancellation_requested_by == f"cli:{getpass.getuser()}"
