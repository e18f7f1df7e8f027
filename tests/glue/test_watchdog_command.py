"""``manage.py watchdog``: status, cancel, fail-lane, purge, recover, prune."""

import io
import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone

import django_watchdog as wd
from django_watchdog.domain.values import Decision
from django_watchdog.models import Job, Worker
from django_watchdog.ops.tables import parse_age
from django_watchdog.store.store import Partition, Store

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]


class Terminal(io.StringIO):
    """A stdin that says it is a terminal, with the operator's answer in it."""

    def isatty(self):
        return True


def watchdog(*args, stdin=None):
    out = io.StringIO()
    call_command("watchdog", *args, stdout=out, stdin=stdin or io.StringIO())
    return out.getvalue()


def settle(job_id, lanes=("default",)):
    claimed = Store().claim(Partition(lanes=lanes))
    assert claimed.job.job_id == job_id
    Store().settle(job_id, claimed.claim_token, Decision.completed())


def register_worker(worker_id, *, lanes=(), age=0.0):
    now = timezone.now() - timedelta(seconds=age)
    Worker.objects.create(
        worker_id=worker_id,
        host="box",
        pid=42,
        lanes=list(lanes),
        concurrency=2,
        started_at=now,
        heartbeat_at=now,
    )


# -- status -------------------------------------------------------------------------------


def test_status_json_counts_lanes_queues_and_workers():
    wd.enqueue("a1", queue="qa")
    wd.enqueue("a2", queue="qa")
    wd.enqueue("b1", queue="qb", lane="mail")
    wd.enqueue("done", queue="qc")
    Store().claim(Partition(lanes=("default",)))  # a1 runs
    register_worker("w-live", lanes=["default"])
    register_worker("w-gone", age=3600)
    data = json.loads(watchdog("status", "--json"))
    assert data["counts"]["queued"] == 3 and data["counts"]["running"] == 1
    assert data["counts"]["settled"] >= 0
    lanes = {lane["lane"]: lane for lane in data["lanes"]}
    assert (lanes["default"]["queued"], lanes["default"]["running"]) == (2, 1)
    assert lanes["default"]["ready"] == 1  # qc's head; qa is busy with a1
    assert lanes["default"]["workers"] == ["w-live"]
    assert lanes["mail"]["workers"] == []
    assert data["oldest_ready_age_s"] is not None
    queues = {q["queue"]: q for q in data["queues"]}
    assert queues["qa"] == {"queue": "qa", "queued": 1, "running": 1, "queued_exact": True}
    assert data["queues_with_work"] == 3
    workers = {w["worker_id"]: w for w in data["workers"]}
    assert workers["w-live"]["alive"] and not workers["w-gone"]["alive"]


def test_status_judges_this_hosts_workers_by_their_process_and_ages_on_the_db_clock():
    """One rule with recovery (engine/liveness.py): a live process on this host is alive
    whatever its heartbeat says, a gone one is dead; heartbeat ages use the database's clock."""
    import os

    from django_watchdog.engine import liveness

    started = liveness.started_at() or timezone.now()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    long_ago = timezone.now() - timedelta(hours=1)
    here = liveness.this_host()
    Worker.objects.create(
        worker_id="w-here", host=here, pid=os.getpid(), started_at=started, heartbeat_at=long_ago
    )
    Worker.objects.create(
        worker_id="w-exited",
        host=here,
        pid=gone.pid,
        started_at=started,
        heartbeat_at=timezone.now(),
    )
    workers = {w["worker_id"]: w for w in json.loads(watchdog("status", "--json"))["workers"]}
    assert workers["w-here"]["alive"] is True
    assert workers["w-exited"]["alive"] is False
    assert 3590 < workers["w-here"]["heartbeat_age_s"] < 3700
    assert workers["w-exited"]["heartbeat_age_s"] < 60


def test_status_ages_the_oldest_ready_job_on_the_db_clock(monkeypatch):
    """The database stamped the job's enqueue time: a host clock an hour ahead of it adds
    nothing to the job's wait (as heartbeat ages, and recovery, use the database's clock)."""
    wd.enqueue("a1", queue="qa", lane="mail")
    ahead = timezone.now() + timedelta(hours=1)
    monkeypatch.setattr(timezone, "now", lambda: ahead)
    data = json.loads(watchdog("status", "--json"))
    assert 0 <= data["oldest_ready_age_s"] < 600
    [lane] = data["lanes"]
    assert 0 <= lane["oldest_ready_age_s"] < 600


def test_status_table_is_readable():
    wd.enqueue("a1", queue="qa", lane="mail")
    register_worker("w-1")
    text = watchdog("status")
    for heading in ("LANES", "QUEUES", "WORKERS"):
        assert heading in text
    assert "1 queued, 0 running" in text
    assert "mail" in text and "qa" in text and "w-1" in text and "alive" in text


def test_status_on_an_empty_database():
    text = watchdog("status")
    assert "no pending jobs" in text and "no registered workers" in text


def test_settled_count_is_capped_without_a_planner_estimate(monkeypatch):
    from django_watchdog.ops import status

    for n in range(4):
        wd.enqueue(f"j{n}", queue=f"q{n}")
        settle(f"j{n}")
    monkeypatch.setattr(status, "SETTLED_COUNT_CAP", 2)
    data = json.loads(watchdog("status", "--json"))
    if connection.vendor in ("postgresql", "mysql"):
        assert data["settled_count_exact"] is False  # the planner's estimate
        assert f"~{data['counts']['settled']} settled" in watchdog("status")
    else:
        assert (data["counts"]["settled"], data["settled_count_exact"]) == (2, False)
        assert "2+ settled" in watchdog("status")


# -- cancel --------------------------------------------------------------------------------


def test_cancel_records_replays_and_reports_problems():
    wd.enqueue("j", queue="q")
    assert "cancellation recorded" in watchdog("cancel", "j")
    assert "cancellation replayed" in watchdog("cancel", "j")
    with pytest.raises(CommandError, match="refused"):
        watchdog("cancel", "j", "--cancellation-id", "other")
    with pytest.raises(CommandError, match="no job 'nope'"):
        watchdog("cancel", "nope")
    with pytest.raises(CommandError, match="job_id"):
        watchdog("cancel", "x" * 300)


# -- fail-lane and purge ---------------------------------------------------------------------


def test_fail_lane_loops_until_done_printing_progress():
    for n in range(300):
        wd.enqueue(f"m{n}", queue=f"q{n % 7}", lane="mail")
    out = watchdog("fail-lane", "mail", "--reason", "SMTP relay decommissioned", "--yes")
    assert "failed 256 jobs (256 so far), more remain" in out
    assert "lane 'mail': 300 jobs failed" in out
    assert set(Job.objects.values_list("outcome", flat=True)) == {"failed"}


def test_destructive_actions_refuse_without_a_terminal_or_yes():
    wd.enqueue("old", queue="done")
    settle("old")
    Job.objects.filter(job_id="old").update(settled_at=timezone.now() - timedelta(days=2))
    wd.enqueue("m", queue="q", lane="mail")
    with pytest.raises(CommandError, match="--yes"):
        watchdog("fail-lane", "mail", "--reason", "r")
    with pytest.raises(CommandError, match="--yes"):
        watchdog("purge-queued", "q")
    with pytest.raises(CommandError, match="--yes"):
        watchdog("prune", "--older-than", "1d")
    assert Job.objects.get(job_id="m").state == "queued"
    assert Job.objects.filter(job_id="old").exists()


def test_confirmation_on_a_terminal():
    wd.enqueue("m", queue="q")
    out = watchdog("purge-queued", "q", stdin=Terminal("n\n"))  # "no" is not an error: exit 0
    assert "Delete 1 queued jobs of queue 'q'? [y/N]" in out
    assert "nothing changed" in out
    assert Job.objects.filter(job_id="m").exists()
    out = watchdog("purge-queued", "q", stdin=Terminal("y\n"))
    assert "Delete 1 queued jobs of queue 'q'? [y/N]" in out
    assert "1 queued jobs deleted" in out
    assert not Job.objects.exists()


def test_purge_keeps_running_jobs():
    wd.enqueue("r", queue="q")
    wd.enqueue("w", queue="q")
    Store().claim()
    assert "1 queued jobs deleted" in watchdog("purge-queued", "q", "--yes")
    assert list(Job.objects.values_list("job_id", flat=True)) == ["r"]
    assert "has no queued jobs" in watchdog("purge-queued", "q")


def test_bad_arguments_name_the_problem():
    with pytest.raises(CommandError, match="lane"):
        watchdog("fail-lane", "bad lane", "--reason", "r", "--yes")
    with pytest.raises(CommandError, match="reason"):
        watchdog("fail-lane", "mail")
    with pytest.raises(CommandError, match="not a duration"):
        watchdog("prune", "--older-than", "soon")
    with pytest.raises(CommandError, match="not a configured database"):
        watchdog("status", "--database", "nope")
    with pytest.raises(CommandError):
        watchdog("explode")


# -- recover and prune ------------------------------------------------------------------------


def test_recover_reconciles_claims_of_silent_workers():
    wd.enqueue("lost", queue="q", max_recoveries=1)
    register_worker("w-dead", age=3600)
    claimed = Store().claim(worker_id="w-dead")
    assert claimed.status == "claimed"
    out = watchdog("recover")
    assert "lost: requeued" in out and "1 disappeared claims reconciled" in out
    assert Job.objects.get(job_id="lost").recovery_count == 1
    assert "0 disappeared claims" in watchdog("recover")


def test_prune_uses_older_than_or_the_retention_setting():
    for n in range(3):
        wd.enqueue(f"j{n}", queue=f"q{n}")
        settle(f"j{n}")
    Job.objects.filter(job_id__in=["j0", "j1"]).update(
        settled_at=timezone.now() - timedelta(days=9)
    )
    with pytest.raises(CommandError, match="RETENTION"):
        watchdog("prune", "--yes")
    out = watchdog("prune", "--older-than", "7d", "--batch-size", "1", "--yes")
    assert "deleted 1 jobs (2 so far)" in out and "2 settled jobs pruned" in out
    Job.objects.filter(job_id="j2").update(settled_at=timezone.now() - timedelta(hours=2))
    with override_settings(WATCHDOG={"RETENTION": 3600}):
        assert "1 settled jobs pruned" in watchdog("prune", "--yes")
    assert not Job.objects.exists()


def test_every_prompt_shows_its_count_and_no_changes_nothing():
    for n in range(3):
        wd.enqueue(f"s{n}", queue=f"s{n}")
        settle(f"s{n}")
    Job.objects.update(settled_at=timezone.now() - timedelta(days=9))
    for n in range(2):
        wd.enqueue(f"m{n}", queue="q", lane="mail")
    before = sorted(Job.objects.values_list("job_id", "state", "outcome"))

    out = watchdog("prune", "--older-than", "7d", stdin=Terminal("n\n"))
    assert "Delete 3 settled jobs settled more than 7d00h ago? [y/N]" in out
    assert "nothing changed" in out
    out = watchdog("fail-lane", "mail", "--reason", "r", stdin=Terminal("no\n"))
    assert "Fail 2 queued and running jobs of lane 'mail' ('r')? [y/N]" in out
    assert "nothing changed" in out
    out = watchdog("purge-queued", "q", stdin=Terminal("\n"))
    assert "Delete 2 queued jobs of queue 'q'? [y/N]" in out
    assert "nothing changed" in out
    assert sorted(Job.objects.values_list("job_id", "state", "outcome")) == before

    assert "nothing changed" in watchdog("prune", "--older-than", "30d", stdin=Terminal("y\n"))
    with pytest.raises(CommandError, match="Delete 3 settled jobs.*--yes"):
        watchdog("prune", "--older-than", "7d")  # no terminal: refused, the count said


@pytest.mark.parametrize("bare", ["1", "30", "1.5", " 7 "])
def test_prune_refuses_an_age_without_a_unit(bare):
    """``--older-than 1 --yes`` once deleted every settled job: a bare number meant seconds."""
    wd.enqueue("kept", queue="q")
    settle("kept")
    with pytest.raises(CommandError, match=r"has no unit.*d \(days\)"):
        watchdog("prune", "--older-than", bare, "--yes")
    assert Job.objects.filter(job_id="kept").exists()


def test_prune_help_names_the_units_and_the_prompt():
    from django_watchdog.management.commands.watchdog import Command

    parser = Command().create_parser("manage.py", "watchdog")
    (actions,) = [a for a in parser._actions if a.dest == "action"]  # noqa: SLF001
    help_text = " ".join(actions.choices["prune"].format_help().split())
    assert "A bare number is refused" in help_text
    for unit in ("s (seconds)", "m (minutes)", "h (hours)", "d (days)", "w (weeks)"):
        assert unit in help_text
    assert "saying how many jobs will go" in help_text
    overview = " ".join(parser.format_help().split())
    assert "answering no changes nothing and exits 0" in overview


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("45", 45),
        ("45s", 45),
        ("90m", 5400),
        ("12h", 43200),
        ("30d", 2592000),
        ("2w", 1209600),
        ("1.5h", 5400),
        ("P3D", 259200),
        ("3 00:00:00", 259200),
    ],
)
def test_ages(text, seconds):
    assert parse_age(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "soon", "-5", "0", "5y"])
def test_bad_ages(text):
    with pytest.raises(ValueError):
        parse_age(text)


def test_exit_code_and_message_from_the_shell():
    """A real ``manage.py`` run: a refused action exits non-zero with the reason on stderr."""
    env = {
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "WATCHDOG_DB_NAME": str(connection.settings_dict["NAME"]),
        "PATH": "/usr/bin:/bin",
    }
    import os

    env = {**os.environ, **env}
    done = subprocess.run(
        [sys.executable, "-m", "django", "watchdog", "purge-queued", "q"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "no queued jobs" in done.stdout
    wd.enqueue("m", queue="q")
    done = subprocess.run(
        [sys.executable, "-m", "django", "watchdog", "purge-queued", "q"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "--yes" in done.stderr
    done = subprocess.run(
        [sys.executable, "-m", "django", "watchdog", "status", "--json"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["counts"]["queued"] == 1


@pytest.mark.parametrize("age", ["1000000d", "99999999999999999999s", "P999999D", "inf", "1e400"])
def test_prune_refuses_an_age_that_overflows(age):
    wd.enqueue("kept", queue="q")
    with pytest.raises(CommandError, match="older-than"):
        watchdog("prune", "--older-than", age, "--yes")
    assert Job.objects.filter(job_id="kept").exists()
