"""The tutorial and the django.tasks how-to, followed the way a reader does, in a fresh
project: the code the pages show is what runs.

Every file, command and shell session comes from the page itself (``docs_page``): the
project is made with ``django-admin startproject`` and ``manage.py startapp``, the page's
files are written into it, its ``manage.py`` commands run as shown (the web server on a free
port, the worker as a real subprocess) and what the page says the reader sees is checked:
the worker's banner, the view's answers, the jobs' outcomes and results, the admin, the
tutorial's shell sessions of steps 8 and 9 (as doctests), and the timeout of step 9.
Editing a page changes what this test runs; a block or command the test does not act on
fails it.

Departures from the tutorial, each to keep the test short: step 9's ``timeout=60`` runs as
``timeout=1`` and its worker with ``--burst``; ``createsuperuser`` takes its answers from
the environment; ``runserver`` listens on a free port without the autoreloader.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import django
import pytest

from tests.acceptance.conftest import ROOT, wait_until
from tests.acceptance.docs_page import DOCS, Command, DocsPage, FileBlock, Snippet

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.skipif(
        os.environ.get("WATCHDOG_TEST_DB", "sqlite") != "sqlite",
        reason="the tutorial's project runs on its own SQLite file, whatever the test database",
    ),
]

ADMIN = {"username": "reader", "password": "a-tutorial-password", "email": "r@example.com"}

# Runs the page's shell sessions as doctests, in one namespace, as a reader's open shell.
_DOCTESTS = """
import doctest, json, os, sys
globs = {"__name__": "tutorial"}
failures = 0
for line, code in json.loads(open(os.environ["TUTORIAL_DOCTESTS"]).read()):
    where = f"docs/tutorial.md, line {line}"
    test = doctest.DocTestParser().get_doctest(code, globs, where, "docs/tutorial.md", line - 1)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, clear_globs=False)
    failures += runner.failures
    globs = test.globs
sys.exit(1 if failures else 0)
"""


class Project:
    """The reader's project directory, driven with the venv's own Python."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.env = {
            key: value
            for key, value in os.environ.items()
            if key not in ("DJANGO_SETTINGS_MODULE", "WATCHDOG_DB_NAME", "WATCHDOG_TEST_LOG")
        }
        # The package under test, not whatever copy the venv has installed.
        self.env.update(PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
        self.started: list[subprocess.Popen[bytes]] = []
        self.logs: list[IO[str]] = []

    def argv(self, command: str) -> list[str]:
        """A command as the page shows it, run with this interpreter."""
        words = shlex.split(command, comments=True)
        if words[0] == "python":
            return [sys.executable, *words[1:]]
        if words[0] == "django-admin":
            return [sys.executable, "-m", "django", *words[1:]]
        raise AssertionError(f"the page shows a command this test does not run: {command}")

    def run(self, command: str, *extra: str, env: dict[str, str] | None = None) -> str:
        result = subprocess.run(  # noqa: S603 - the page's own commands
            [*self.argv(command), *extra],
            cwd=self.directory,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, f"$ {command}\n{result.stdout}\n{result.stderr}"
        return result.stdout + result.stderr

    def start(self, command: str, *extra: str, log: str) -> subprocess.Popen[bytes]:
        out, err = (
            (self.directory / f"{log}.out").open("w"),
            (self.directory / f"{log}.err").open("w"),
        )
        self.logs += [out, err]
        process = subprocess.Popen(  # noqa: S603 - the page's own commands
            [*self.argv(command), *extra],
            cwd=self.directory,
            env=self.env,
            stdout=out,
            stderr=err,
        )
        self.started.append(process)
        return process

    def log(self, name: str) -> str:
        out, err = (self.directory / f"{name}.out", self.directory / f"{name}.err")
        return out.read_text() + err.read_text()

    def write(self, block: FileBlock, *, replace: tuple[str, str] | None = None) -> None:
        code = block.code
        if replace:
            assert code.count(replace[0]) == 1, f"{block.path} no longer shows {replace[0]!r}"
            code = code.replace(*replace)
        path = self.directory / block.path
        path.write_text((path.read_text() + "\n" + code) if block.append else code)

    def rows(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        with closing(sqlite3.connect(self.directory / "db.sqlite3", timeout=20)) as db:
            db.row_factory = sqlite3.Row
            return db.execute(sql, args).fetchall()

    def job(self, job_id: str) -> sqlite3.Row:
        (row,) = self.rows("SELECT * FROM watchdog_job WHERE job_id = ?", job_id)
        return row

    def report(self, pk: int) -> tuple[str, int | None]:
        (row,) = self.rows("SELECT status, rows FROM reports_report WHERE id = ?", pk)
        return row["status"], row["rows"]

    def stop_all(self) -> None:
        for process in self.started:
            if process.poll() is None:
                process.kill()
                process.wait()
        for log in self.logs:
            log.close()


@pytest.fixture
def project(tmp_path):
    directory = tmp_path / "mysite"
    directory.mkdir()
    made = Project(directory)
    yield made
    made.stop_all()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=5).close()  # noqa: S310 - a local test server
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
    return True


def only(commands: list[Command], word: str) -> Command:
    (found,) = [c for c in commands if word in shlex.split(c.command)]
    commands.remove(found)
    return found


def test_the_tutorial_runs_as_written(project):
    page = DocsPage("tutorial.md")

    # 1. A project with one app (the venv is this one; the package is the worktree's).
    commands = page.step("1.").take_commands()
    assert [c.command.split()[0] for c in commands[:2]] == ["python", "pip"]
    for command in commands[2:]:
        project.run(command.command)

    # 2. Settings: appended to the generated file, so they replace its INSTALLED_APPS and
    # DATABASES. `manage.py check` finds nothing to warn about (no W001-W003).
    for block in page.step("2.").take_files():
        project.write(block)
    assert project.run("python manage.py check").strip() == (
        "System check identified no issues (0 silenced)."
    )

    # 3. The model, its migration, and watchdog's tables.
    step = page.step("3.")
    for block in step.take_files():
        project.write(block)
    for command in step.take_commands():
        project.run(command.command)
    named = set(re.findall(r"`(watchdog_\w+)`", step.text))
    tables = project.rows("SELECT name FROM sqlite_master WHERE type = 'table'")
    assert {row["name"] for row in tables if row["name"].startswith("watchdog_")} == named

    # 4-5. The view, its URL, the handler.
    for number in ("4.", "5."):
        for block in page.step(number).take_files():
            project.write(block)

    # 6. Run it: the web server, a worker, two reports.
    commands = page.step("6.").take_commands()
    createsuperuser = only(commands, "createsuperuser")
    project.run(
        createsuperuser.command,
        "--noinput",
        env={f"DJANGO_SUPERUSER_{key.upper()}": value for key, value in ADMIN.items()},
    )
    address = f"127.0.0.1:{free_port()}"
    project.start(only(commands, "runserver").command, "--noreload", address, log="web")
    wait_until(lambda: answers(f"http://{address}/admin/login/"), message="runserver")

    shown_worker = only(commands, "watchdog_worker")
    worker = project.start(shown_worker.command, log="worker")
    banner = wait_until(
        lambda: _banner(project, len(shown_worker.output)), message="the worker's banner"
    )
    assert _as_shown(banner, shown_worker.output, project.directory) == list(shown_worker.output)

    for number, curl in enumerate(commands, start=1):
        words = shlex.split(curl.command)
        assert words[0] == "curl", f"step 6 shows a command this test does not run: {curl}"
        url = words[1].replace("127.0.0.1:8000", address)
        with urllib.request.urlopen(url, timeout=30) as response:  # noqa: S310 - local server
            assert response.read().decode().splitlines() == list(curl.output)
        assert project.job(f"report:{number}")["queue"] == f"report:{number}"

    # Ctrl-C while report 2 builds: the running job finishes, the worker exits 0.
    wait_until(
        lambda: project.job("report:2")["state"] == "running",
        timeout=60,
        message="report 2 running",
    )
    worker.send_signal(signal.SIGINT)
    assert worker.wait(timeout=60) == 0, project.log("worker")
    for number in (1, 2):
        job = project.job(f"report:{number}")
        assert (job["state"], job["outcome"]) == ("settled", "completed")
        assert json.loads(job["result"]) == {"rows": 500}
        assert project.report(number) == ("done", 500)

    # 7. The admin lists the jobs, the queues and the worker.
    _admin_pages_show(address, ["report:1", "report:2"])

    # 8 and 9. The shell sessions, as doctests in the project (one shell, kept open).
    sessions = page.step("8.").take_doctests() + page.step("9.").take_doctests()
    assert len(sessions) == 2
    _run_doctests(project, sessions)

    # 9. The new decorator; a restarted worker runs `b` first (step 8), and each run
    # outlasts its timeout: the report says "stopped", the job settles failed.
    step = page.step("9.")
    (jobs_py,) = step.take_files()
    project.write(jobs_py, replace=("timeout=60,", "timeout=1,"))
    project.run("python manage.py watchdog_worker", "--burst")
    (shown,) = re.findall(r"the reason\s+`(TimeoutError:[^`]+)`", step.text)
    reason = " ".join(shown.split()).replace("60.0 s", "1.0 s")
    first, second = project.job("b"), project.job("a")
    for job in (first, second):
        assert (job["outcome"], job["failure_reason"]) == ("failed", reason)
    assert _time(first["started_at"]) < _time(second["started_at"])
    assert project.report(1) == ("stopped", 500)
    assert project.report(2) == ("stopped", 500)
    delayed = project.rows("SELECT state FROM watchdog_job WHERE job_id LIKE 'report:1:rerun:%'")
    assert [row["state"] for row in delayed] == ["queued"]

    assert page.untaken() == []


# Reads a task's result back through Django's API, as the page's `get_result` line does.
_TASK_RESULT = """
import json
from myapp.tasks import send_receipt
result = send_receipt.get_result({job_id!r})
print(json.dumps([result.status, result.return_value, result.task.queue_name]))
"""
# What the page's test code has from the test around it: the deferred task's result.
_DEFERRED = """
from datetime import timedelta
from django.utils import timezone
from myapp.tasks import send_receipt
result = send_receipt.get_result({job_id!r})
"""


@pytest.mark.skipif(django.VERSION < (6, 0), reason="django.tasks is new in Django 6.0")
def test_the_django_tasks_how_to_runs_as_written(project):
    """docs/how-to/django-tasks.md: the settings, the task module and the shell code the page
    shows, in a project made as the tutorial makes one (its app named ``myapp``, as the page
    names it); a worker as shown runs the task, and the deferred one waits."""
    page = DocsPage("how-to/django-tasks.md")
    project.run("django-admin startproject mysite .")
    project.run("python manage.py startapp myapp")
    settings = project.directory / "mysite" / "settings.py"
    # The page's `INSTALLED_APPS = [..., "django_watchdog"]`, and the reader's own app.
    settings.write_text(settings.read_text() + '\nINSTALLED_APPS += ["django_watchdog", "myapp"]\n')
    configure = page.step("Configure")
    for block in configure.take_files():
        project.write(block)
    assert "Run `python manage.py migrate`" in configure.text
    project.run("python manage.py migrate")
    every_lane, emails_only = configure.take_commands()
    assert shlex.split(every_lane.command, comments=True)[2:] == ["watchdog_worker"]
    assert shlex.split(emails_only.command, comments=True)[3:] == ["--lane", "task:emails"]

    _run_shell(project, configure.take_shells())
    (job,) = project.rows("SELECT * FROM watchdog_job")
    assert (job["lane"], job["priority"], job["state"]) == ("task:emails", 10, "queued")
    project.run(emails_only.command, "--burst")
    job = project.job(job["job_id"])
    assert (job["state"], job["outcome"], json.loads(job["result"])) == (
        "settled",
        "completed",
        "sent",
    )
    read_back = _TASK_RESULT.format(job_id=job["job_id"])
    shown = json.loads(project.run("python manage.py shell -c", read_back).splitlines()[-1])
    assert shown == ["SUCCESSFUL", "sent", "emails"]

    # Defer: a burst worker does not wait for the deferred task; the page's test code
    # (its asserts) then claims it by moving the clock.
    defer, in_a_test = page.step("Defer a task").take_shells()
    _run_shell(project, [defer])
    (deferred,) = project.rows("SELECT * FROM watchdog_job WHERE job_id != ?", job["job_id"])
    assert deferred["run_after"] is not None
    project.run(every_lane.command, "--burst")
    assert project.job(deferred["job_id"])["state"] == "queued"
    _run_shell(project, [in_a_test], before=_DEFERRED.format(job_id=deferred["job_id"]))
    assert project.job(deferred["job_id"])["state"] == "running"

    assert page.untaken() == []


def _run_shell(project: Project, snippets: list[Snippet], *, before: str = "") -> None:
    """Run the page's code in one ``manage.py shell`` (after ``before``), each block
    reported at its page line."""
    assert snippets, "the page shows no shell code here"
    code = before + "\n".join(
        f"exec(compile({chr(10) * (s.line - 1) + s.code!r}, {str(DOCS / s.page)!r}, 'exec'))"
        for s in snippets
    )
    project.run("python manage.py shell -c", code)


def _banner(project: Project, lines: int) -> list[str] | None:
    out = (project.directory / "worker.out").read_text().splitlines()
    return out[:lines] if len(out) >= lines else None


def _as_shown(banner: list[str], shown: tuple[str, ...], directory: Path) -> list[str]:
    """The worker's banner with this run's worker id, pid and directory put as the page
    shows them (``myhost-41327-9f2c1a``, ``41327``, ``/home/you/mysite``)."""
    real = re.fullmatch(r"watchdog worker (\S+) \(pid (\d+)\)", banner[0])
    page = re.fullmatch(r"watchdog worker (\S+) \(pid (\d+)\)", shown[0])
    home = re.search(r"\(sqlite (\S+)/db\.sqlite3\)", "\n".join(shown))
    assert real and page and home, banner
    return [
        line.replace(real[1], page[1]).replace(real[2], page[2]).replace(str(directory), home[1])
        for line in banner
    ]


def _admin_pages_show(address: str, job_ids: list[str]) -> None:
    """Log in as the superuser of step 6, then open the three lists step 7 describes."""
    cookies = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(cookies))
    base = f"http://{address}/admin/"
    browser.open(f"{base}login/", timeout=30).close()
    (token,) = [cookie.value for cookie in cookies if cookie.name == "csrftoken"]
    form = {"username": ADMIN["username"], "password": ADMIN["password"], "next": "/admin/"}
    form["csrfmiddlewaretoken"] = token or ""
    request = urllib.request.Request(  # noqa: S310 - a local test server
        f"{base}login/?next=/admin/",
        data=urllib.parse.urlencode(form).encode(),
        headers={"Referer": f"{base}login/"},
    )
    with browser.open(request, timeout=30) as response:
        assert response.url.rstrip("/").endswith("/admin"), "the login did not succeed"
    with browser.open(f"{base}django_watchdog/job/", timeout=30) as response:
        jobs = response.read().decode()
    for job_id in job_ids:
        assert job_id in jobs
    for page in ("queue", "worker"):
        with browser.open(f"{base}django_watchdog/{page}/", timeout=30) as response:
            assert response.status == 200


def _run_doctests(project: Project, sessions: list[Snippet]) -> None:
    blocks = project.directory.parent / "doctests.json"
    blocks.write_text(json.dumps([[session.line, session.code] for session in sessions]))
    result = subprocess.run(  # noqa: S603 - the page's own shell sessions
        [sys.executable, "manage.py", "shell", "-c", _DOCTESTS],
        cwd=project.directory,
        env={**project.env, "TUTORIAL_DOCTESTS": str(blocks)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)
