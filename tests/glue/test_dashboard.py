"""The admin dashboard: charts from real rows, a fixed number of queries, staff-only, offline."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.admin import charts
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job, Worker
from django_watchdog.ops import activity, pending
from django_watchdog.ops.activity import Bucket
from django_watchdog.store.store import Store

pytestmark = pytest.mark.django_db

DASHBOARD = "admin:django_watchdog_dashboard"
#: The dashboard's own queries: the lowest and the highest id, the hour, the day, the probe
#: that finds no further lane with pending jobs, ready, workers, running.
DASHBOARD_QUERIES = 8
#: And per lane with pending jobs: its probe, its queued and its running jobs counted.
PER_PENDING_LANE = 3


def run(job_id, decision, worker_id="w-1"):
    claim = Store().claim(worker_id=worker_id)
    assert claim.job.job_id == job_id
    Store().settle(job_id, claim.claim_token, decision)


def live_worker(worker_id, *, lanes=(), concurrency=2, age=0.0):
    moment = timezone.now() - timedelta(seconds=age)
    return Worker.objects.create(
        worker_id=worker_id,
        host="box",
        pid=7,
        lanes=list(lanes),
        concurrency=concurrency,
        started_at=moment,
        heartbeat_at=moment,
    )


@pytest.fixture
def traffic():
    """Mail: 3 completed, 1 failed; reports: 1 cancelled, 1 running, 2 queued; two workers."""
    for n in range(4):
        wd.enqueue(f"mail-{n}", queue=f"m{n}", lane="mail")
        run(f"mail-{n}", Decision.failed("ValueError: no") if n == 3 else Decision.completed())
    wd.enqueue("rep-0", queue="r0", lane="reports")
    wd.cancel("rep-0")
    assert Store().claim(worker_id="w-1").status == "cancelled"
    wd.enqueue("rep-1", queue="r1", lane="reports")
    assert Store().claim(worker_id="w-1").job.job_id == "rep-1"
    wd.enqueue("rep-2", queue="r1", lane="reports")
    wd.enqueue("rep-3", queue="r3", lane="reports")
    live_worker("w-1", lanes=["mail", "reports"], concurrency=4)
    live_worker("w-gone", age=3600)  # silent: not live


def test_dashboard_draws_throughput_backlog_and_workers(admin_client, traffic):
    response = admin_client.get(reverse(DASHBOARD))
    assert response.status_code == 200
    html = response.content.decode()
    lanes = {row.lane: row for row in response.context["lane_rows"]}
    assert set(lanes) == {"mail", "reports"}
    assert (lanes["mail"].hour.completed, lanes["mail"].hour.failed) == (3, 1)
    assert (lanes["mail"].day.total, lanes["reports"].day.cancelled) == (4, 1)
    assert (lanes["reports"].queued, lanes["reports"].ready, lanes["reports"].running) == (2, 1, 1)
    assert lanes["reports"].live_workers == 1
    # Two charts per lane and one per total; a meter per lane's backlog and age, per worker.
    assert html.count('class="watchdog-chart watchdog-throughput"') == 2 * 2 + 2
    assert 'aria-label="lane mail, last hour: 4 settled, 1 failed"' in html
    assert 'aria-label="all lanes, last day: 5 settled, 1 failed"' in html
    # mail's failure: in its hour and day, and in the hour and day of all lanes
    assert html.count('<rect class="failed"') == 4
    assert "oldest ready job waiting" in html
    assert [w.worker_id for w in response.context["worker_rows"]] == ["w-1"]
    assert "1 live worker" in html and "w-gone" not in html
    assert "1 / 4" in html  # w-1 runs rep-1 in one of its four slots


def test_a_lane_nobody_serves_says_so(admin_client):
    wd.enqueue("lonely", queue="q", lane="nobody")
    live_worker("w-mail", lanes=["mail"])
    response = admin_client.get(reverse(DASHBOARD))
    (row,) = response.context["lane_rows"]
    assert (row.lane, row.queued, row.ready, row.live_workers) == ("nobody", 1, 1, 0)
    assert re.search(r'data-lane="nobody".*?<strong>none</strong>', response.content.decode(), re.S)


def test_an_empty_database_renders(admin_client):
    response = admin_client.get(reverse(DASHBOARD))
    assert response.status_code == 200
    html = response.content.decode()
    assert "No job has run in the last day" in html
    assert "No live worker" in html


def test_the_number_of_queries_does_not_grow_with_lanes_jobs_or_workers(admin_client):
    url = reverse(DASHBOARD)
    admin_client.get(url)  # session and permission caches

    def watchdog_queries():
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(url).status_code == 200
        every = [q["sql"] for q in captured.captured_queries]
        return len(every), [sql for sql in every if "watchdog_" in sql]

    empty_total, empty = watchdog_queries()
    wd.enqueue("a", queue="a", lane="a")
    run("a", Decision.completed())
    small_total, small = watchdog_queries()
    for n in range(30):
        wd.enqueue(f"j{n}", queue=f"q{n}", lane=f"lane-{n % 6}", priority=n % 3)
    for n in range(8):
        live_worker(f"w{n}", lanes=[f"lane-{n % 6}"])
    for _ in range(5):
        claim = Store().claim(worker_id="w1")
        Store().settle(claim.job.job_id, claim.claim_token, Decision.failed("E: x"))
    big_total, big = watchdog_queries()
    assert len(empty) == len(small) == DASHBOARD_QUERIES
    assert empty_total == small_total
    # 30 jobs in 6 lanes: an index probe and two capped counts per lane, none per job.
    lanes = 6
    assert len(big) == DASHBOARD_QUERIES + PER_PENDING_LANE * lanes, big
    assert big_total == empty_total + PER_PENDING_LANE * lanes


def test_a_lane_past_the_cap_shows_an_estimate_or_a_lower_bound(admin_client, monkeypatch):
    """The backlog is counted up to a cap per lane and state, never in full: past it the
    planner's estimate ("~"), or where the database gives none (SQLite) the cap ("3+")."""
    monkeypatch.setattr(pending, "COUNT_CAP", 3)
    for n in range(5):
        wd.enqueue(f"j{n}", queue="q", lane="busy")
    wd.enqueue("other", queue="o", lane="calm")
    with CaptureQueriesContext(connection) as captured:
        response = admin_client.get(reverse(DASHBOARD))
    rows = {row.lane: row for row in response.context["lane_rows"]}
    assert (rows["calm"].queued_shown, rows["calm"].running_shown) == ("1", "0")
    if connection.vendor == "sqlite":
        assert rows["busy"].queued_shown == "3+"
    else:
        assert rows["busy"].queued_shown.startswith("~")
    assert rows["busy"].queued_shown in response.content.decode()
    grouped = [q["sql"] for q in captured.captured_queries if "GROUP BY" in q["sql"]]
    assert not [sql for sql in grouped if "running" in sql and "queued" in sql], grouped


def test_staff_with_the_view_permission_only(client, traffic):
    url = reverse(DASHBOARD)
    assert client.get(url).status_code == 302  # anonymous: to the login page
    user = User.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(user)
    assert client.get(url).status_code == 403
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="django_watchdog", codename="view_job")
    )
    assert client.get(url).status_code == 200
    outsider = User.objects.create_user("outsider", password="pw", is_staff=False)
    client.force_login(outsider)
    assert client.get(url).status_code == 302


def test_linked_from_the_app_index(admin_client):
    response = admin_client.get(reverse("admin:app_list", args=["django_watchdog"]))
    assert f'href="{reverse(DASHBOARD)}"' in response.content.decode()


def test_the_page_loads_nothing_from_the_network(admin_client, traffic):
    html = admin_client.get(reverse(DASHBOARD)).content.decode()
    external = re.findall(r'(?:src|href)="(?:https?:)?//[^"]+"', html)
    assert external == []
    assert "<script" not in html.split('id="content-main"', 1)[1]


def test_chart_labels_are_text():
    start = timezone.now()
    svg = charts.throughput(
        [Bucket(start=start, completed=1)],
        step=timedelta(minutes=5),
        label='<script>alert("x")</script>',
        time_format="%H:%M",
    )
    assert "<script>" not in svg and "&lt;script&gt;" in svg


def test_collect_reads_the_newest_jobs_only(monkeypatch):
    monkeypatch.setattr(activity, "SCAN_JOBS", 2)
    for n in range(3):
        wd.enqueue(f"j{n}", queue=f"q{n}")
        run(f"j{n}", Decision.completed())
    snapshot = activity.collect("default", now=timezone.now())
    assert snapshot.scan_cut
    assert activity.total(snapshot.day).completed == 2


def test_the_oldest_ready_job_is_aged_on_the_db_clock():
    """The database stamped the enqueue time: a host clock an hour ahead adds nothing."""
    wd.enqueue("j", queue="q", lane="mail")
    snapshot = activity.collect("default", now=timezone.now() + timedelta(hours=1))
    [lane] = snapshot.lanes
    assert lane.oldest_ready_age_s is not None and 0 <= lane.oldest_ready_age_s < 600


def test_ids_far_above_one_are_not_a_cut():
    """Only older jobs left out make a cut, not where the id sequence stands (a database
    that has held many jobs, all pruned, starts far above 1), as the metrics judge it."""
    wd.enqueue("j", queue="q")
    run("j", Decision.completed())
    Job.objects.filter(job_id="j").update(id=activity.SCAN_JOBS * 3)
    snapshot = activity.collect("default", now=timezone.now())
    assert not snapshot.scan_cut
    assert activity.total(snapshot.day).completed == 1


def test_workers_are_judged_live_as_status_and_recovery_judge_them(admin_client):
    """This host's workers by their process (a running one whose heartbeat is an hour old is
    live, an exited one whose heartbeat is fresh is not), others by their heartbeat."""
    import os
    import subprocess
    import sys

    from django_watchdog.engine import liveness

    here, long_ago = liveness.this_host(), timezone.now() - timedelta(hours=1)
    started = liveness.started_at() or timezone.now()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    Worker.objects.create(
        worker_id="w-here", host=here, pid=os.getpid(), started_at=started, heartbeat_at=long_ago
    )
    Worker.objects.create(
        worker_id="w-exited", host=here, pid=gone.pid, started_at=started, heartbeat_at=long_ago
    )
    Worker.objects.filter(worker_id="w-exited").update(heartbeat_at=timezone.now())
    live_worker("w-elsewhere")
    live_worker("w-silent-elsewhere", age=3600)
    shown = {w.worker_id for w in activity.collect("default", now=timezone.now()).workers}
    assert shown == {"w-here", "w-elsewhere"}
