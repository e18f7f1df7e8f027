"""In a real browser: the admin's job list, filter, detail, cancel action, an explained stuck
job and a re-run that a real worker runs; the example app.

Playwright for Python drives Debian's Chromium (``apt-get install chromium``; scripts/bootstrap
does it in CI). Playwright's own browser download is never used. Screenshots go to
``artifacts/screenshots/``. Without Chromium the tests skip, except in CI where they fail.
"""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection, connections
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job, Worker
from django_watchdog.store.store import Partition, Store

pytestmark = pytest.mark.acceptance

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
IN_CI = os.environ.get("CI") == "true"


def _browser_missing() -> str | None:
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is missing (WATCHDOG_BROWSER=1 scripts/bootstrap installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is missing (pip install -e '.[dev]')"
    return None


@pytest.fixture
def browser_page(monkeypatch):
    """A Chromium page; skips (fails in CI) when Chromium or Playwright is not installed."""
    missing = _browser_missing()
    if missing:
        if IN_CI:
            pytest.fail(f"browser test must run in CI: {missing}")
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the test's own ORM calls are
    # still plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.set_default_timeout(20_000)
        try:
            yield page
        finally:
            browser.close()
            # ORM calls made while Playwright ran may have opened a connection of their own
            # (another context); close it, or PostgreSQL cannot drop the test database.
            connections.close_all()


def shot(page, name: str) -> Path:
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


# The admin, through pytest-django's live server.


def _seed_jobs():
    wd.enqueue("invoice-1", queue="customer-1", lane="mail", payload={"amount": 10})
    claim = Store().claim(worker_id="browser-test")
    Store().settle("invoice-1", claim.claim_token, Decision.completed({"sent": True}))
    wd.enqueue(
        "invoice-2",
        queue="customer-2",
        lane="mail",
        payload={"note": "<script>window.__injected = 1</script>", "lines": [1, 2, 3]},
    )
    wd.enqueue("report-9", queue="customer-2", lane="reports", payload=None)


def test_admin_list_filter_detail_and_cancel(live_server, browser_page):
    from playwright.sync_api import expect

    User.objects.create_superuser("boss", "boss@example.com", "s3cret-pass")
    _seed_jobs()
    page = browser_page

    page.goto(live_server.url + "/admin/login/?next=/admin/django_watchdog/job/")
    page.fill("#id_username", "boss")
    page.fill("#id_password", "s3cret-pass")
    page.click("input[type=submit]")
    expect(page.locator("#result_list")).to_be_visible()
    expect(page.locator("#result_list tbody tr")).to_have_count(3)
    shot(page, "admin-job-list")

    page.click('#changelist-filter a[href*="state__exact=queued"]')
    expect(page.locator("#result_list tbody tr")).to_have_count(2)
    assert "state__exact=queued" in page.url
    shot(page, "admin-job-list-filtered")

    page.click("#result_list a:text-is('invoice-2')")
    expect(page.locator("pre.watchdog-data").first).to_contain_text(
        "<script>window.__injected = 1</script>"
    )
    assert page.evaluate("window.__injected") is None  # shown as text, never run
    assert page.locator("input[name=priority]").count() == 0  # nothing editable
    shot(page, "admin-job-detail")

    page.go_back()
    pk = Job.objects.get(job_id="invoice-2").pk
    page.check(f"input[name=_selected_action][value='{pk}']")
    page.select_option("select[name=action]", "cancel")
    page.click("button[name=index]")
    expect(page.locator("h1")).to_contain_text("Request cancellation")
    expect(page.locator(".watchdog-confirm")).to_contain_text("invoice-2")
    assert Job.objects.get(job_id="invoice-2").cancellation_id is None  # not before confirming
    shot(page, "admin-cancel-confirmation")

    page.click("input[type=submit][value='Yes, request cancellation']")
    expect(page.locator(".messagelist")).to_contain_text("Cancellation requested for 1 job (")
    shot(page, "admin-cancel-done")
    assert Job.objects.get(job_id="invoice-2").cancellation_id == "cancel:invoice-2"
    assert wd.queue_head("customer-2").cancellation_requested


def test_dashboard_draws_charts_for_real_data(live_server, browser_page):
    """From the app index to the dashboard: charts for settled, failed and queued jobs, and
    nothing fetched from anywhere but the site itself."""
    from playwright.sync_api import expect

    from django_watchdog.engine import liveness
    from django_watchdog.models import Worker

    User.objects.create_superuser("boss", "boss@example.com", "s3cret-pass")
    _seed_jobs()  # mail: 1 completed, 1 queued; reports: 1 queued
    wd.enqueue("invoice-3", queue="customer-3", lane="mail")
    claim = Store().claim(Partition(lanes=["mail"]), worker_id="browser-test")
    assert claim.job.job_id == "invoice-2"
    Store().settle("invoice-2", claim.claim_token, Decision.failed("ValueError: no"))
    # Live by its process (this test's, on this host), whatever its heartbeat's age: a
    # heartbeat stamped now is older than WORKER_TIMEOUT (3 s) by the time a loaded machine
    # has logged in and drawn the page.
    Worker.objects.create(
        worker_id="w-live",
        host=liveness.this_host(),
        pid=os.getpid(),
        lanes=["mail"],
        started_at=liveness.started_at() or timezone.now(),
        heartbeat_at=timezone.now(),
    )
    page = browser_page
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))

    page.goto(live_server.url + "/admin/login/?next=/admin/django_watchdog/")
    page.fill("#id_username", "boss")
    page.fill("#id_password", "s3cret-pass")
    page.click("input[type=submit]")
    page.click(".watchdog-dashboard-link a")
    expect(page.locator("h1")).to_contain_text("Watchdog dashboard")
    mail = page.locator("tr.watchdog-lane[data-lane='mail']")
    expect(mail.locator("svg.watchdog-throughput")).to_have_count(2)
    expect(mail.locator("svg.watchdog-throughput").first).to_have_attribute(
        "aria-label", "lane mail, last hour: 2 settled, 1 failed"
    )
    expect(mail.locator("svg.watchdog-throughput rect.failed")).to_have_count(2)
    expect(page.locator("#watchdog-hour svg rect.completed")).to_have_count(1)
    reports = page.locator("tr.watchdog-lane[data-lane='reports']")
    expect(reports).to_contain_text("none")  # no live worker serves the reports lane
    expect(page.locator("#watchdog-workers")).to_contain_text("w-live")
    box = mail.locator("svg.watchdog-throughput").first.bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 20  # drawn, not hidden
    shot(page, "admin-dashboard")
    assert [url for url in requested if not url.startswith(live_server.url)] == []


def _log_in(page, live_server, next_url):
    User.objects.create_superuser("boss", "boss@example.com", "s3cret-pass")
    page.goto(live_server.url + "/admin/login/?next=" + next_url)
    page.fill("#id_username", "boss")
    page.fill("#id_password", "s3cret-pass")
    page.click("input[type=submit]")


def test_admin_explains_a_stuck_job_and_reruns_a_failed_one(
    live_server, browser_page, spawn_worker
):
    from playwright.sync_api import expect

    from .conftest import wait_until

    # A failed job, settled before any worker runs, and a job in a lane nothing serves.
    wd.enqueue("build-3", queue="builds", lane="t-record", payload={"result": "built"})
    claim = Store().claim(worker_id="browser-test")
    Store().settle("build-3", claim.claim_token, Decision.failed("ValueError: disk full"))
    wd.enqueue("stuck-1", queue="nowhere-1", lane="t-nowhere")
    worker = spawn_worker("--lane", "t-record")
    wait_until(
        lambda: Worker.objects.filter(lanes=["t-record"]).exists(),
        message=f"the worker to register\n{worker.output()}",
    )
    page = browser_page
    _log_in(page, live_server, "/admin/django_watchdog/job/")

    row = page.locator("#result_list tr", has=page.locator("a:text-is('stuck-1')"))
    expect(row.locator(".field-progress")).to_contain_text(
        "no live worker serves lane t-nowhere, and this project registers no handler for it"
    )
    shot(page, "admin-stuck-job-explained")

    page.click("#result_list a:text-is('build-3')")
    page.click(".object-tools a.watchdog-rerun")
    expect(page.locator(".watchdog-confirm")).to_contain_text("as a new job, build-3~rerun-1")
    assert not Job.objects.filter(rerun_of="build-3").exists()  # not before confirming
    shot(page, "admin-rerun-confirmation")
    page.click("input[type=submit][value='Yes, re-run']")
    expect(page.locator(".messagelist")).to_contain_text("Job build-3 re-run as build-3~rerun-1.")
    expect(page.locator(".field-reruns_display")).to_contain_text("re-run of build-3")

    # The worker runs the re-run; the original stays failed.
    wait_until(
        lambda: Job.objects.filter(job_id="build-3~rerun-1", outcome="completed").exists(),
        message=f"the re-run to complete\n{worker.output()}",
    )
    page.reload()
    expect(page.locator(".field-outcome")).to_contain_text("completed")
    shot(page, "admin-rerun-completed")
    assert Job.objects.get(job_id="build-3").outcome == "failed"


# The example project: its own web server and worker processes.


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_http(url: str, process: subprocess.Popen, log: Path, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout}s:\n{log.read_text()}")


@pytest.fixture
def example_site(tmp_path):
    """The example project migrated on a fresh database, served with a worker beside it."""
    environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
    environment.pop("DJANGO_SETTINGS_MODULE", None)
    dropped = None
    if connection.vendor == "postgresql":
        import psycopg

        name = "watchdog_example_browser" + os.environ.get("WATCHDOG_TEST_DB_SUFFIX", "")
        params = connection.settings_dict
        dsn = f"host={params['HOST']} port={params['PORT']} user={params['USER']} dbname=postgres"
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            admin.execute(f'CREATE DATABASE "{name}"')
        environment["DATABASE_URL"] = (
            f"postgres://{params['USER']}@{params['HOST']}:{params['PORT']}/{name}"
        )
        dropped = (dsn, name)
    else:
        environment.pop("DATABASE_URL", None)
        environment["EXAMPLE_SQLITE_PATH"] = str(tmp_path / "example.sqlite3")
    manage = [sys.executable, str(ROOT / "example_project" / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=environment, check=True, timeout=120)

    port = _free_port()
    server_log, worker_log = tmp_path / "server.log", tmp_path / "worker.log"
    server = subprocess.Popen(
        [*manage, "runserver", f"127.0.0.1:{port}", "--noreload"],
        env=environment,
        stdout=server_log.open("w"),
        stderr=subprocess.STDOUT,
    )
    worker = subprocess.Popen(
        [*manage, "watchdog_worker", "--concurrency", "2", "--shutdown-grace", "5"],
        env=environment,
        stdout=worker_log.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        _wait_for_http(url, server, server_log)
        yield url
    finally:
        for process in (server, worker):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in (server, worker):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if dropped is not None:
            import psycopg

            with psycopg.connect(dropped[0], autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{dropped[1]}" WITH (FORCE)')
        if os.environ.get("WATCHDOG_BROWSER_LOGS"):
            print(server_log.read_text(), worker_log.read_text())


def test_example_app_shows_the_build_completing_without_reload(example_site, browser_page):
    from playwright.sync_api import expect

    page = browser_page
    page.goto(example_site)
    page.fill("input[name=title]", "Quarterly numbers")
    page.fill("input[name=seconds]", "3")
    page.click("#create-report")
    status = page.locator("tr[data-report] [data-field=status]").first
    assert status.inner_text() in ("queued", "running")
    # Mark this document: a reload or navigation would lose the mark.
    page.evaluate("window.__watchdog_mark = 'same page'")
    expect(status).to_have_text("running", timeout=20_000)
    shot(page, "example-report-running")
    expect(status).to_have_text("completed", timeout=30_000)
    assert page.evaluate("window.__watchdog_mark") == "same page"
    expect(page.locator("tr[data-report] [data-field=result]").first).to_contain_text('"words":2')
    shot(page, "example-report-completed")
