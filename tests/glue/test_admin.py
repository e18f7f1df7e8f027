"""The admin: pages render, nothing is editable, actions need permission and confirmation."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.admin import pagination
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job, Queue, Worker
from django_watchdog.store.store import Store

pytestmark = pytest.mark.django_db

JOBS = "admin:django_watchdog_job_changelist"
QUEUES = "admin:django_watchdog_queue_changelist"
WORKERS = "admin:django_watchdog_worker_changelist"


def job_url(job_id):
    return reverse("admin:django_watchdog_job_change", args=[Job.objects.get(job_id=job_id).pk])


@pytest.fixture
def jobs():
    """Settled, running and queued jobs over three queues and two lanes."""
    wd.enqueue("done-1", queue="orders-1", lane="mail", payload={"to": "a@example.com"})
    wd.enqueue("boom-1", queue="orders-2", lane="mail")
    for expected in ("done-1", "boom-1"):
        claim = Store().claim(worker_id="w-1")
        assert claim.job.job_id == expected
        decision = (
            Decision.completed({"sent": True})
            if expected == "done-1"
            else Decision.failed("ValueError: bad", traceback="Traceback <tb>\nValueError: bad")
        )
        Store().settle(expected, claim.claim_token, decision)
    wd.enqueue("run-1", queue="orders-3", lane="reports", payload=[1, 2])
    assert Store().claim(worker_id="w-1").job.job_id == "run-1"
    wd.enqueue("wait-1", queue="orders-3", lane="reports", payload={"html": "<script>x</script>"})
    wd.enqueue("wait-2", queue="orders-3", lane="reports")
    now = timezone.now()
    Worker.objects.create(
        worker_id="w-1",
        host="h",
        pid=1,
        lanes=["mail", "reports"],
        started_at=now,
        heartbeat_at=now,
    )
    Worker.objects.create(
        worker_id="w-old",
        host="h",
        pid=2,
        exclude_lanes=["slow"],
        started_at=now,
        heartbeat_at=now - timedelta(hours=1),
    )


@pytest.fixture
def staff(db):
    """Make a staff user with the given permissions and log ``client`` in as them."""

    def make(client, *codenames):
        user = User.objects.create_user("staff", password="pw", is_staff=True)
        for codename in codenames:
            user.user_permissions.add(
                Permission.objects.get(content_type__app_label="django_watchdog", codename=codename)
            )
        client.force_login(user)
        return user

    return make


def rows(response):
    return [str(job) for job in response.context["cl"].result_list]


def test_job_list_renders_with_columns(admin_client, jobs):
    response = admin_client.get(reverse(JOBS))
    assert response.status_code == 200
    assert rows(response) == ["wait-2", "wait-1", "run-1", "boom-1", "done-1"]
    html = response.content.decode()
    for column in (
        "Job id",
        "Queue",
        "Lane",
        "Priority",
        "State",
        "Outcome",
        "Recovery count",
        "Enqueued at",
        "Started at",
        "Settled at",
        "Duration",
    ):
        assert column in html
    assert response.context["cl"].full_result_count is None  # the table is never counted


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"state__exact": "queued"}, ["wait-2", "wait-1"]),
        ({"state__exact": "running"}, ["run-1"]),
        ({"outcome": "failed"}, ["boom-1"]),
        ({"lane": "mail"}, ["boom-1", "done-1"]),
        ({"q": "wait"}, ["wait-2", "wait-1"]),
        ({"q": "done-1"}, ["done-1"]),
        ({"q": "orders-3"}, ["wait-2", "wait-1", "run-1"]),
        ({"q": "orders"}, []),  # a queue matches exactly, not by its beginning
    ],
)
def test_job_list_filters_and_search(admin_client, jobs, query, expected):
    response = admin_client.get(reverse(JOBS), query)
    assert response.status_code == 200
    assert rows(response) == expected


def test_lane_filter_offers_lanes_without_scanning_settled_jobs(admin_client, jobs):
    response = admin_client.get(reverse(JOBS))
    spec = next(
        f
        for f in response.context["cl"].filter_specs
        if getattr(f, "parameter_name", None) == "lane"
    )
    lanes = [value for value, _ in spec.lookup_choices]
    assert "reports" in lanes  # pending work
    assert "mail" in lanes  # a worker serves it (its jobs are all settled)
    assert "slow" in lanes  # named by a worker


def test_job_detail_shows_escaped_pretty_data(admin_client, jobs):
    response = admin_client.get(job_url("wait-1"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<script>x</script>" not in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html
    assert '<pre class="watchdog-data">{\n  &quot;html&quot;' in html

    html = admin_client.get(job_url("boom-1")).content.decode()
    assert "Traceback &lt;tb&gt;\nValueError: bad" in html
    assert "ValueError: bad" in html
    html = admin_client.get(job_url("done-1")).content.decode()
    assert "&quot;sent&quot;: true" in html


def test_job_detail_hides_the_claim_token(admin_client, jobs):
    job = Job.objects.get(job_id="run-1")
    html = admin_client.get(job_url("run-1")).content.decode()
    assert job.claim_token not in html
    assert "w-1" in html


def test_nothing_is_addable_editable_or_deletable(admin_client, jobs):
    job = Job.objects.get(job_id="wait-1")
    assert admin_client.get(reverse("admin:django_watchdog_job_add")).status_code == 403
    assert (
        admin_client.get(reverse("admin:django_watchdog_job_delete", args=[job.pk])).status_code
        == 403
    )
    response = admin_client.post(job_url("wait-1"), {"priority": 99, "state": "settled"})
    assert response.status_code == 403
    job.refresh_from_db()
    assert (job.priority, job.state) == (0, "queued")
    html = admin_client.get(job_url("wait-1")).content.decode()
    assert 'name="priority"' not in html
    assert 'name="_save"' not in html
    for model in ("job", "queue", "worker"):
        html = admin_client.get(reverse(f"admin:django_watchdog_{model}_changelist")).content
        assert f"/admin/django_watchdog/{model}/add/" not in html.decode()
    actions = admin_client.get(reverse(JOBS)).context["cl"].model_admin.get_actions
    assert "delete_selected" not in actions(admin_client.get(reverse(JOBS)).wsgi_request)


def test_queue_list_shows_heads_counts_and_ages(admin_client, jobs):
    response = admin_client.get(reverse(QUEUES), {"work": "all"})
    assert response.status_code == 200
    assert rows(response) == ["orders-1", "orders-2", "orders-3"]
    # By default only queues with queued or running jobs; the idle ones a click away.
    assert rows(admin_client.get(reverse(QUEUES))) == ["orders-3"]
    assert rows(admin_client.get(reverse(QUEUES), {"work": "idle"})) == ["orders-1", "orders-2"]
    admin = response.context["cl"].model_admin
    queue = next(q for q in response.context["cl"].result_list if q.name == "orders-3")
    assert admin.head_state(queue) == "running"
    assert admin.head_job(queue).endswith(">run-1</a>")
    assert (admin.queued_count(queue), admin.running_count(queue)) == (2, 1)
    assert admin.oldest_queued_age(queue).endswith("ms") or "s" in admin.oldest_queued_age(queue)
    done = next(q for q in response.context["cl"].result_list if q.name == "orders-1")
    assert (admin.head_state(done), admin.settled_count(done)) == ("idle", 1)
    assert admin.oldest_queued_age(done) == "-"
    detail = admin_client.get(reverse("admin:django_watchdog_queue_change", args=["orders-3"]))
    assert detail.status_code == 200
    assert "run-1" in detail.content.decode()


def test_queue_list_annotates_a_page_in_a_fixed_number_of_queries(admin_client, jobs):
    """Every statement counts (head reads too): a page of 33 queues costs what one of 3 does."""

    def queries() -> list[str]:
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(reverse(QUEUES)).status_code == 200
        return [query["sql"] for query in captured.captured_queries]

    few = queries()
    for n in range(30):
        wd.enqueue(f"extra-{n}", queue=f"extra-{n}")
    many = queries()
    assert len(many) == len(few), many
    # session, user, paginator count, page, the shown queues' counts, their heads.
    assert len(many) <= 6, many
    assert sum("AS rank" in sql for sql in many) == 1, many
    # Nor does any statement grow by a query per queue shown (a page of 100 queues once
    # sent 80 KB of heads, planned on every read): only the names it is given.
    growth = sum(map(len, many)) - sum(map(len, few))
    assert growth < 40 * 30, growth


def test_worker_list_shows_liveness_and_running_jobs(admin_client, jobs):
    response = admin_client.get(reverse(WORKERS))
    assert response.status_code == 200
    admin = response.context["cl"].model_admin
    workers = {w.worker_id: w for w in response.context["cl"].result_list}
    assert admin.alive(workers["w-1"]) is True
    assert admin.alive(workers["w-old"]) is False
    assert admin.heartbeat_age(workers["w-old"]).startswith("1h")
    assert admin.lanes_display(workers["w-old"]) == "all but slow"
    assert admin.running_jobs(workers["w-1"]).endswith(">1</a>")
    alive = admin_client.get(reverse(WORKERS), {"alive": "yes"})
    assert rows(alive) == ["w-1 (h:1)"]


# Actions


def post_action(client, url, action, selected, **extra):
    data = {"action": action, "_selected_action": selected, "index": 0, **extra}
    return client.post(reverse(url), data)


def test_view_only_staff_sees_no_actions(client, staff, jobs):
    staff(client, "view_job", "view_queue")
    response = client.get(reverse(JOBS))
    assert response.status_code == 200
    assert response.context["action_form"] is None or not [
        c for c in response.context["action_form"].fields["action"].choices if c[0]
    ]
    pk = Job.objects.get(job_id="wait-1").pk
    response = post_action(client, JOBS, "cancel", [pk], post="yes")
    assert Job.objects.get(job_id="wait-1").cancellation_id is None
    queue_response = post_action(client, QUEUES, "purge_queued", ["orders-3"], post="yes")
    assert queue_response.status_code in (200, 302)
    assert Job.objects.filter(queue="orders-3", state="queued").count() == 2


def test_cancel_action_confirms_then_records(client, staff, jobs):
    staff(client, "view_job", "change_job")
    pks = list(
        Job.objects.filter(job_id__in=["wait-1", "run-1", "done-1"]).values_list("pk", flat=True)
    )
    response = post_action(client, JOBS, "cancel", pks)
    assert response.status_code == 200
    assert response.templates[0].name == "django_watchdog/admin/confirm_action.html"
    html = response.content.decode()
    assert "Record a cancellation for 2 pending jobs?" in html
    assert "1 job is settled or already has a cancellation: it is left as it is." in html
    assert Job.objects.exclude(cancellation_id=None).count() == 0

    response = post_action(client, JOBS, "cancel", pks, post="yes")
    assert response.status_code == 302
    cancelled = set(Job.objects.exclude(cancellation_id=None).values_list("job_id", flat=True))
    assert cancelled == {"wait-1", "run-1"}
    assert wd.queue_head("orders-3").cancellation_requested
    messages = [str(m) for m in client.get(reverse(JOBS)).context["messages"]]
    assert "Cancellation requested for 2 jobs (recorded: 2)." in messages


def test_fail_lane_action_asks_for_a_reason(client, staff, jobs):
    staff(client, "view_job", "change_job")
    pk = Job.objects.get(job_id="wait-1").pk
    response = post_action(client, JOBS, "fail_lane", [pk])
    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="reason"' in html and "reports" in html
    response = post_action(client, JOBS, "fail_lane", [pk], post="yes", reason="")
    assert response.status_code == 200  # the page again, with the error
    assert response.context["form"].errors
    assert Job.objects.filter(lane="reports", state="settled").count() == 0

    response = post_action(client, JOBS, "fail_lane", [pk], post="yes", reason="printer on fire")
    assert response.status_code == 302
    failed = Job.objects.filter(lane="reports")
    assert {(j.state, j.outcome, j.failure_reason) for j in failed} == {
        ("settled", "failed", "printer on fire")
    }
    assert Job.objects.get(job_id="done-1").outcome == "completed"  # another lane


def test_fail_lane_loops_over_batches(client, staff, jobs, monkeypatch):
    from django_watchdog.store import fail_lane

    monkeypatch.setattr(fail_lane, "LANE_FAILURE_BATCH", 1)
    staff(client, "view_job", "change_job")
    pk = Job.objects.get(job_id="wait-1").pk
    post_action(client, JOBS, "fail_lane", [pk], post="yes", reason="stop")
    assert not Job.objects.filter(lane="reports").exclude(state="settled").exists()


def test_purge_action_needs_delete_permission_and_confirmation(client, staff, jobs):
    staff(client, "view_queue", "view_job", "delete_job")
    response = post_action(client, QUEUES, "purge_queued", ["orders-3", "orders-1"])
    assert response.status_code == 200
    html = response.content.decode()
    assert "Delete 2 queued jobs of these queues?" in html
    assert Job.objects.filter(queue="orders-3").count() == 3

    response = post_action(client, QUEUES, "purge_queued", ["orders-3", "orders-1"], post="yes")
    assert response.status_code == 302
    assert set(Job.objects.filter(queue="orders-3").values_list("job_id", flat=True)) == {"run-1"}
    assert Job.objects.filter(queue="orders-1").count() == 1  # settled jobs stay


def test_change_permission_alone_cannot_purge(client, staff, jobs):
    staff(client, "view_queue", "view_job", "change_job")
    response = client.get(reverse(QUEUES))
    choices = (
        [c[0] for c in response.context["action_form"].fields["action"].choices]
        if (response.context["action_form"])
        else []
    )
    assert "purge_queued" not in choices


# Pagination


def test_paginator_counts_exactly_below_the_limit(jobs):
    paginator = pagination.EstimatedCountPaginator(Job.objects.order_by("-id"), 2)
    assert paginator.count == 5
    assert paginator.estimated is False


def test_paginator_estimates_above_the_limit(jobs, monkeypatch):
    from django.db import connection

    monkeypatch.setattr(pagination, "EXACT_COUNT_LIMIT", 2)
    paginator = pagination.EstimatedCountPaginator(Job.objects.order_by("-id"), 2)
    if connection.vendor in ("postgresql", "mysql"):  # the planner's estimate
        assert paginator.count >= 3
        assert paginator.estimated is True
    else:
        assert paginator.count == 5
        assert paginator.estimated is False


def test_queue_row_for_every_job_queue(jobs):
    assert set(Queue.objects.values_list("name", flat=True)) >= {"orders-1", "orders-2", "orders-3"}
