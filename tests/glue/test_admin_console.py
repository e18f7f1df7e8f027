"""The operator's console: why a job waits, re-run, buttons on a job's page, who did what."""

import re
from dataclasses import replace
from datetime import timedelta

import django
import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

import django_watchdog as wd
from django_watchdog import handlers
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job, Queue, Worker
from django_watchdog.store.store import Partition, Store

from . import test_admin
from .test_admin import JOBS, QUEUES, WORKERS, job_url, post_action, rows

jobs = test_admin.jobs  # the fixtures of the admin's tests
staff = test_admin.staff

pytestmark = pytest.mark.django_db

SECOND_RESOLUTION = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")


def progress(client, job_id):
    """The job list's "progress" cell for ``job_id`` (the page annotates all rows at once)."""
    response = client.get(reverse(JOBS), {"q": job_id})
    admin = response.context["cl"].model_admin
    job = next(j for j in response.context["cl"].result_list if j.job_id == job_id)
    return admin.progress(job)


def log_entries(job_id):
    return list(
        LogEntry.objects.filter(object_repr=job_id).values_list(
            "user__username", "action_flag", "change_message"
        )
    )


@pytest.fixture
def mail_handler(clean_handlers):
    handlers.handler("mail")(lambda job: None)
    handlers.handler("reports")(lambda job: None)


# Why a queued job waits, and for how long


def test_a_queued_job_behind_a_running_head_says_so(admin_client, jobs, mail_handler):
    assert re.fullmatch(
        r"queued \S+( \S+)?: behind running job run-1 \(running for \S+( \S+)?\)",
        progress(admin_client, "wait-1"),
    )
    assert re.fullmatch(r"running for \S+( \S+)? on w-1", progress(admin_client, "run-1"))
    assert progress(admin_client, "done-1") == "-"


def test_a_job_in_a_lane_no_live_worker_serves_says_so(admin_client, jobs, mail_handler):
    wd.enqueue("lost-1", queue="lost", lane="nowhere")
    assert progress(admin_client, "lost-1").endswith(
        ": no live worker serves lane nowhere, and this project registers no handler for it"
    )
    handlers.handler("nowhere")(lambda job: None)
    assert progress(admin_client, "lost-1").endswith(
        ": no live worker serves lane nowhere (none has a handler for it)"
    )
    Worker.objects.filter(worker_id="w-1").update(heartbeat_at=timezone.now() - timedelta(days=1))
    assert progress(admin_client, "lost-1").endswith(
        ": no live worker: no worker has sent a heartbeat recently"
    )


def test_a_worker_serving_all_but_some_lanes_serves_the_others(admin_client, jobs, mail_handler):
    Worker.objects.filter(worker_id="w-old").update(heartbeat_at=timezone.now())
    wd.enqueue("any-1", queue="any", lane="anything")
    wd.enqueue("slow-1", queue="slow", lane="slow")
    assert progress(admin_client, "any-1").endswith(": ready: waiting for a free worker slot")
    assert "no live worker serves lane slow" in progress(admin_client, "slow-1")


def test_delayed_retrying_cancelled_and_queued_behind_a_head(admin_client, jobs, mail_handler):
    wd.enqueue(
        "later-1", queue="orders-9", lane="mail", run_after=timezone.now() + timedelta(hours=2)
    )
    assert re.search(
        r": delayed until \S+ \S+ \S+ \(in (1h 59m|2h 0m)", progress(admin_client, "later-1")
    )

    wd.enqueue("head-1", queue="orders-8", lane="mail")
    wd.enqueue("next-1", queue="orders-8", lane="mail")
    assert progress(admin_client, "next-1").endswith(
        ": behind queued job head-1, the head of its queue"
    )

    claim = Store().claim(Partition(lanes=["mail"]))
    assert claim.job.job_id == "head-1"
    retry_at = timezone.now() + timedelta(minutes=5)
    Store().settle(
        "head-1", claim.claim_token, replace(Decision.failed("E: x"), retry_at=retry_at)
    )[0]
    assert re.search(
        r": failed attempt 1; retry at \S+ \S+ \S+ \(in [45]m", progress(admin_client, "head-1")
    )
    assert re.search(r": behind job head-1, which retries at ", progress(admin_client, "next-1"))

    wd.cancel("wait-2")
    assert progress(admin_client, "wait-2").endswith(
        ": cancellation recorded: the next claim settles it cancelled"
    )


def test_a_job_behind_a_cancelled_job_names_its_queues_head(admin_client, jobs, mail_handler):
    # A cancelled queued job is made ready (it settles unrun at the next claim): it is no
    # head, and the jobs behind the head wait for the head.
    wd.enqueue("gone-7", queue="orders-7", lane="mail")
    wd.enqueue("head-7", queue="orders-7", lane="mail", priority=1)  # the head now
    wd.enqueue("next-7", queue="orders-7", lane="mail")
    wd.cancel("gone-7")
    assert Job.objects.get(job_id="gone-7").ready
    # Rewritten after the cancel, the head comes after it in a read in the table's order.
    Job.objects.filter(job_id="head-7").update(priority=1)
    assert progress(admin_client, "next-7").endswith(
        ": behind queued job head-7, the head of its queue"
    )


def test_times_have_second_resolution(admin_client, jobs):
    html = admin_client.get(job_url("done-1")).content.decode()
    assert len(SECOND_RESOLUTION.findall(html)) >= 3  # enqueued, started, settled
    html = admin_client.get(reverse(JOBS)).content.decode()
    assert SECOND_RESOLUTION.search(html)


def test_the_job_list_explains_a_page_in_a_fixed_number_of_queries(admin_client, jobs):
    def queries(url):
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(url).status_code == 200
        return len(captured)

    few = queries(reverse(JOBS))
    for n in range(40):
        wd.enqueue(f"more-{n}", queue=f"more-{n % 7}", lane=f"lane-{n % 3}")
    # The lane filter lists pending jobs' lanes one index probe each (a skip scan, flat
    # however many jobs a lane holds): 3 lanes more are 3 probes more; rows are none.
    more_lanes = queries(reverse(JOBS))
    assert more_lanes == few + 3
    for n in range(40, 80):
        wd.enqueue(f"more-{n}", queue=f"more-{n % 7}", lane=f"lane-{n % 3}")
    assert queries(reverse(JOBS)) == more_lanes
    detail = queries(job_url("wait-1"))
    assert queries(job_url("more-39")) == detail


# Links that keep their filter visible


def test_links_between_jobs_queues_and_workers_keep_their_filter_visible(admin_client, jobs):
    html = admin_client.get(job_url("run-1")).content.decode()
    assert "?queue=orders-3" in html
    assert reverse("admin:django_watchdog_worker_change", args=["w-1"]) in html
    response = admin_client.get(reverse(JOBS), {"queue": "orders-3"})
    assert rows(response) == ["wait-2", "wait-1", "run-1"]
    specs = {
        spec.parameter_name: spec
        for spec in response.context["cl"].filter_specs
        if hasattr(spec, "parameter_name")
    }
    assert specs["queue"].has_output() and specs["queue"].value() == "orders-3"
    assert (
        'title="orders-3"' in response.content.decode()
        or ">orders-3</a>" in response.content.decode()
    )

    worker_page = admin_client.get(reverse(WORKERS)).content.decode()
    assert "state__exact=running&amp;claimed_by=w-1" in worker_page
    response = admin_client.get(reverse(JOBS), {"state__exact": "running", "claimed_by": "w-1"})
    assert rows(response) == ["run-1"]
    specs = {
        spec.parameter_name: spec
        for spec in response.context["cl"].filter_specs
        if hasattr(spec, "parameter_name")
    }
    assert specs["claimed_by"].has_output()

    queue_page = admin_client.get(reverse("admin:django_watchdog_queue_change", args=["orders-3"]))
    assert "?queue=orders-3" in queue_page.content.decode()


# Cancel from the job's page


def test_cancel_from_the_job_page_records_who_and_logs_it(client, staff, jobs):
    staff(client, "view_job", "change_job")
    page = client.get(job_url("wait-1")).content.decode()
    cancel_url = reverse(
        "admin:django_watchdog_job_cancel", args=[Job.objects.get(job_id="wait-1").pk]
    )
    assert cancel_url in page
    confirm = client.get(cancel_url)
    html = confirm.content.decode()
    assert "Record a cancellation for job wait-1?" in html
    assert 'value="Yes, request cancellation"' in html
    assert Job.objects.get(job_id="wait-1").cancellation_id is None

    response = client.post(cancel_url, {"post": "yes"})
    assert response.status_code == 302 and response.url == job_url("wait-1")
    job = Job.objects.get(job_id="wait-1")
    assert (job.cancellation_id, job.cancellation_requested_by) == ("cancel:wait-1", "admin:staff")
    assert log_entries("wait-1") == [("staff", CHANGE, "Requested cancellation.")]
    assert cancel_url not in client.get(job_url("wait-1")).content.decode()  # done: no button


def test_nothing_to_cancel_offers_no_confirm_button(client, staff, jobs):
    staff(client, "view_job", "change_job")
    pk = Job.objects.get(job_id="done-1").pk
    assert "/cancel/" not in client.get(job_url("done-1")).content.decode()
    html = client.get(reverse("admin:django_watchdog_job_cancel", args=[pk])).content.decode()
    assert "a cancellation would change nothing" in html
    assert 'class="default"' not in html
    client.post(reverse("admin:django_watchdog_job_cancel", args=[pk]), {"post": "yes"})
    assert Job.objects.get(job_id="done-1").cancellation_id is None
    response = post_action(client, JOBS, "cancel", [pk])
    assert 'class="default"' not in response.content.decode()


def test_cancel_view_needs_the_change_permission(client, staff, jobs):
    staff(client, "view_job")
    pk = Job.objects.get(job_id="wait-1").pk
    assert "/cancel/" not in client.get(job_url("wait-1")).content.decode()
    url = reverse("admin:django_watchdog_job_cancel", args=[pk])
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert Job.objects.get(job_id="wait-1").cancellation_id is None


# Re-run


def test_rerun_from_the_job_page_once_per_confirmation(client, staff, jobs):
    staff(client, "view_job", "add_job")
    original = Job.objects.get(job_id="boom-1")
    rerun_url = reverse("admin:django_watchdog_job_rerun", args=[original.pk])
    assert rerun_url in client.get(job_url("boom-1")).content.decode()
    html = client.get(rerun_url).content.decode()
    assert "as a new job, boom-1~rerun-1" in html
    assert 'name="rerun_id_" value="boom-1~rerun-1"' in html

    first = client.post(rerun_url, {"post": "yes", "rerun_id_": "boom-1~rerun-1"})
    second = client.post(rerun_url, {"post": "yes", "rerun_id_": "boom-1~rerun-1"})  # double click
    new = Job.objects.get(rerun_of="boom-1")
    assert first.url == second.url == job_url(new.job_id)
    assert (new.job_id, new.state, new.queue, new.lane) == (
        "boom-1~rerun-1",
        "queued",
        "orders-2",
        "mail",
    )
    assert new.rerun_requested_by == "admin:staff"
    original.refresh_from_db()
    assert (original.state, original.outcome) == ("settled", "failed")
    assert log_entries("boom-1~rerun-1") == [("staff", ADDITION, "Re-run of boom-1.")]
    assert log_entries("boom-1") == [("staff", CHANGE, "Re-run as boom-1~rerun-1.")]

    new_page = client.get(job_url(new.job_id)).content.decode()
    assert f're-run of <a href="{job_url("boom-1")}">boom-1</a>' in new_page
    old_page = client.get(job_url("boom-1")).content.decode()
    assert f're-run as <a href="{job_url(new.job_id)}">boom-1~rerun-1</a>' in old_page
    # A new confirmation page offers the next re-run.
    assert "boom-1~rerun-2" in client.get(rerun_url).content.decode()


def test_rerun_is_refused_for_jobs_that_did_not_fail(client, staff, jobs):
    staff(client, "view_job", "add_job")
    for job_id in ("done-1", "run-1", "wait-1"):
        assert "/rerun/" not in client.get(job_url(job_id)).content.decode()
        url = reverse("admin:django_watchdog_job_rerun", args=[Job.objects.get(job_id=job_id).pk])
        html = client.get(url).content.decode()
        assert f"Job {job_id} is " in html and "only a settled failed, interrupted or" in html
        assert 'class="default"' not in html
        client.post(url, {"post": "yes"})
    assert not Job.objects.exclude(rerun_of=None).exists()


def test_rerun_needs_the_add_permission(client, staff, jobs):
    staff(client, "view_job", "change_job")
    assert "/rerun/" not in client.get(job_url("boom-1")).content.decode()
    url = reverse("admin:django_watchdog_job_rerun", args=[Job.objects.get(job_id="boom-1").pk])
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert not Job.objects.exclude(rerun_of=None).exists()


def test_rerun_action_reruns_the_failed_among_the_selected(client, staff, jobs):
    staff(client, "view_job", "add_job")
    pks = list(
        Job.objects.filter(job_id__in=["boom-1", "done-1", "wait-1"]).values_list("pk", flat=True)
    )
    response = post_action(client, JOBS, "rerun", pks)
    html = response.content.decode()
    assert "Enqueue 1 settled job&#x27;s work again as a new job?" in html
    assert "2 jobs are not settled failed, interrupted or cancelled: they are not re-run." in html
    boom = Job.objects.get(job_id="boom-1").pk
    data = {f"rerun_id_{boom}": "boom-1~rerun-1", "post": "yes"}
    assert post_action(client, JOBS, "rerun", pks, **data).status_code == 302
    assert post_action(client, JOBS, "rerun", pks, **data).status_code == 302  # again
    assert list(Job.objects.exclude(rerun_of=None).values_list("job_id", flat=True)) == [
        "boom-1~rerun-1"
    ]
    done = Job.objects.get(job_id="done-1").pk
    html = post_action(client, JOBS, "rerun", [done]).content.decode()
    assert 'class="default"' not in html


# Accountable actions and their confirmation pages


def test_confirmation_pages_follow_the_admins_templates(admin_client, jobs):
    pk = Job.objects.get(job_id="wait-1").pk
    html = admin_client.get(reverse("admin:django_watchdog_job_cancel", args=[pk])).content.decode()
    assert "| Django site admin</title>" in html  # admin/base_site.html
    if django.VERSION >= (6, 0):
        assert (
            '<ol class="breadcrumbs">' in html
            and '<li aria-current="page">Request cancellation</li>' in html
        )
    else:
        assert '<div class="breadcrumbs">' in html
    assert f'<a href="{job_url("wait-1")}">wait-1</a>' in html


def test_fail_lane_says_its_whole_lane_effect_and_logs_each_job(client, staff, jobs):
    staff(client, "view_job", "change_job")
    pk = Job.objects.get(job_id="wait-1").pk
    html = post_action(client, JOBS, "fail_lane", [pk]).content.decode()
    assert "Fail 3 jobs in 1 lane?" in html
    assert "not only the 1 selected" in html
    assert "<td>3 jobs in lane reports</td>" in html
    post_action(client, JOBS, "fail_lane", [pk], post="yes", reason="printer on fire")
    for job_id in ("run-1", "wait-1", "wait-2"):
        assert log_entries(job_id) == [
            ("staff", CHANGE, "Failed with lane reports: printer on fire")
        ]
    # Now nothing of the lane is pending: the page offers no confirm button.
    html = post_action(client, JOBS, "fail_lane", [pk]).content.decode()
    assert "Fail 0 jobs in 1 lane?" in html and 'class="default"' not in html


def test_purge_logs_per_queue_and_offers_nothing_for_an_empty_queue(client, staff, jobs):
    staff(client, "view_queue", "view_job", "delete_job")
    html = post_action(client, QUEUES, "purge_queued", ["orders-1"]).content.decode()
    assert "Delete 0 queued jobs of these queues?" in html
    assert 'class="default"' not in html
    post_action(client, QUEUES, "purge_queued", ["orders-3"], post="yes")
    assert log_entries("orders-3") == [("staff", CHANGE, "Purged 2 queued jobs.")]
    assert Queue.objects.filter(name="orders-3").exists()  # the row enqueue relies on stays
    messages = [str(m) for m in client.get(reverse(JOBS)).context["messages"]]
    assert "Purged 2 queued jobs from 1 queue." in messages
