"""``watchdog_worker`` started inside a test's transaction (``call_command`` in a
``django.test.TestCase``) stops at once with a ``CommandError`` naming the fix, instead of
waiting forever for the locks that transaction holds.

The ``TestCase`` runs in a pytest subprocess with a deadline (on its own test database, its
tables made from the models rather than by migrating: seconds, not a minute, on MariaDB), so
a worker that hangs fails this test instead of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.core.management import call_command

import django_watchdog as watchdog
from django_watchdog.models import Job
from tests.testapp import inline_handlers  # noqa: F401 - registers the i-* lanes

ROOT = Path(__file__).resolve().parents[2]
DEADLINE = 120.0

INNER = textwrap.dedent(
    """
    from django.core.management import CommandError, call_command
    from django.test import TestCase

    import django_watchdog as watchdog
    from django_watchdog.models import Job
    from tests.testapp import inline_handlers  # registers the i-* lanes


    class WorkerInATestCase(TestCase):
        def test_the_worker_command_refuses_to_run(self):
            watchdog.enqueue("w:1", queue="w:1", lane="i-echo", payload=1)
            with self.assertRaises(CommandError) as raised:
                call_command("watchdog_worker", "--burst", "--lane", "i-echo")
            message = str(raised.exception)
            for fix in ("django_watchdog.testing", "run_jobs", "TransactionTestCase"):
                self.assertIn(fix, message)
            self.assertEqual(Job.objects.get(job_id="w:1").state, "queued")
    """
)


@pytest.mark.every_database  # the inner pytest runs on the database under test
def test_the_worker_command_in_a_testcase_raises_naming_the_fix(tmp_path):
    inner = tmp_path / "test_inner.py"
    inner.write_text(INNER)
    env = {
        **os.environ,
        "WATCHDOG_TEST_DB_SUFFIX": os.environ.get("WATCHDOG_TEST_DB_SUFFIX", "") + "_inner",
        "PYTHONPATH": str(ROOT),
    }
    command = [
        sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), str(inner),
        "--nomigrations",  # its tables from the models: the test needs no migration's SQL
    ]  # fmt: skip
    try:
        done = subprocess.run(  # noqa: S603 - our own test
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=DEADLINE
        )
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"the worker hung inside the TestCase's transaction:\n{expired.stdout}")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_worker_command_runs_the_jobs():
    watchdog.enqueue("w:1", queue="w:1", lane="i-echo", payload=1)
    call_command("watchdog_worker", "--burst", "--lane", "i-echo")
    assert Job.objects.get(job_id="w:1").outcome == "completed"
