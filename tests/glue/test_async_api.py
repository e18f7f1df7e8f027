"""The async twins of the public verbs (``aenqueue``, ``aenqueue_many``, ``acancel``,
``aget_job``, ``aqueue_head``): usable from async views and async tests, on the request's
(here: the test's) connection and transaction."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.exceptions import SynchronousOnlyOperation
from django.test import TestCase

import django_watchdog as watchdog
from django_watchdog.domain.errors import InvalidInput, JobConflict
from django_watchdog.testing import arun_jobs, run_jobs
from tests.testapp import inline_handlers  # noqa: F401 - registers the i-* lanes
from tests.testapp.views import WELCOME_LANE


class AsyncTwins(TestCase):
    async def test_an_async_view_enqueues_and_reads_back(self):
        response = await self.async_client.post("/asignup", {"username": "ann"})
        self.assertEqual(response.status_code, 201)
        user = await User.objects.aget(username="ann")
        job_id = f"welcome:{user.pk}"
        self.assertEqual(response.json(), {"status": "queued", "state": "queued", "head": job_id})
        (run,) = await arun_jobs()
        self.assertEqual((run.job_id, run.result), (job_id, "welcome ann"))

    async def test_the_sync_verb_cannot_run_in_an_event_loop_but_its_twin_can(self):
        with self.assertRaises(SynchronousOnlyOperation):
            watchdog.enqueue("echo:1", queue="q", lane="i-echo")
        result = await watchdog.aenqueue("echo:1", queue="q", lane="i-echo", payload=1)
        self.assertEqual((result.status, result.job.job_id), ("queued", "echo:1"))
        again = await watchdog.aenqueue("echo:1", queue="q", lane="i-echo", payload=1)
        self.assertEqual(again.status, "duplicate")

    async def test_each_twin_does_what_its_sync_verb_does(self):
        results = await watchdog.aenqueue_many(
            [
                {"job_id": "echo:1", "queue": "q", "lane": "i-echo"},
                {"job_id": "echo:2", "queue": "q", "lane": "i-echo"},
            ]
        )
        self.assertEqual([r.status for r in results], ["queued", "queued"])
        # Made when first read, here on the event loop: from the values written, no query.
        self.assertEqual([r.job.job_id for r in results], ["echo:1", "echo:2"])
        self.assertIsNotNone(results[1].job.enqueued_at.tzinfo)
        head = await watchdog.aqueue_head("q")
        self.assertEqual((head.state, head.job_id), ("queued", "echo:1"))
        cancelled = await watchdog.acancel("echo:1")
        self.assertEqual(cancelled.status, "recorded")
        self.assertEqual((await watchdog.aqueue_head("q")).cancellation_requested, True)
        job = await watchdog.aget_job("echo:2")
        self.assertEqual((job.queue, job.state), ("q", "queued"))
        self.assertIsNone(await watchdog.aget_job("echo:3"))
        self.assertEqual((await watchdog.acancel("echo:3")).status, "missing")

    async def test_bad_input_and_conflicts_raise_as_from_the_sync_verbs(self):
        with self.assertRaisesMessage(InvalidInput, "priority"):
            await watchdog.aenqueue("echo:1", queue="q", priority=True)
        await watchdog.aenqueue("echo:1", queue="q", lane="i-echo")
        with self.assertRaisesMessage(JobConflict, "lane"):
            await watchdog.aenqueue("echo:1", queue="q", lane="i-broken")
        with self.assertRaisesMessage(InvalidInput, "jobs[0]"):
            await watchdog.aenqueue_many([{"queue": "q"}])

    def test_a_twin_joins_the_callers_transaction_from_async_to_sync(self):
        """Thread-sensitive: the twin's query runs on the caller's connection, so the job
        rolls back with the test's transaction and is visible to it meanwhile."""
        async_to_sync(watchdog.aenqueue)(
            "welcome:x", queue="x", lane=WELCOME_LANE, payload={"user": 0}
        )
        self.assertEqual(watchdog.get_job("welcome:x").state, "queued")
        self.assertEqual([r.outcome for r in run_jobs()], ["failed"])  # no user 0


@pytest.mark.parametrize(
    "name", ["aenqueue", "aenqueue_many", "acancel", "aget_job", "aqueue_head"]
)
def test_the_twins_are_exported_and_documented(name):
    twin = getattr(watchdog, name)
    assert name in watchdog.__all__
    assert twin.__name__ == name
    assert f"``{name[1:]}()``" in twin.__doc__
