"""``django_watchdog.testing.run_jobs`` inside ordinary ``django.test.TestCase`` tests: the
jobs run inline in the test's open transaction, with the real handlers, queue order,
decisions, retry policies and ``queue_changed``."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import User
from django.db import connection
from django.test import TestCase
from django.utils import timezone

import django_watchdog as watchdog
from django_watchdog import OutcomeUnknown
from django_watchdog.domain.errors import InvalidInput
from django_watchdog.models import Job
from django_watchdog.signals import job_finished, job_started, queue_changed
from django_watchdog.testing import (
    TooManyRuns,
    capture_enqueued,
    enqueued_jobs,
    run_jobs,
)
from django_watchdog.testing.runner import INLINE_WORKER
from tests.testapp import inline_handlers  # registers the i-* lanes
from tests.testapp.views import WELCOME_LANE


def enqueue(job_id, *, lane="i-echo", queue=None, **options):
    return watchdog.enqueue(job_id, queue=queue or job_id, lane=lane, **options)


class RunJobsInATestCase(TestCase):
    def test_a_view_enqueuing_inside_atomic_has_its_job_run_and_seeing_the_users_row(self):
        response = self.client.post("/signup", {"username": "ann"})
        self.assertEqual(response.status_code, 201)
        self.assertTrue(connection.in_atomic_block)  # still the test's transaction

        (run,) = run_jobs()

        user = User.objects.get(username="ann")
        self.assertEqual(
            (run.job_id, run.queue, run.lane),
            (f"welcome:{user.pk}",) * 1 + (f"user:{user.pk}", WELCOME_LANE),
        )
        self.assertEqual(
            (run.outcome, run.result, run.exception), ("completed", "welcome ann", None)
        )
        self.assertEqual(run.attempts, 1)
        job = watchdog.get_job(run.job_id)
        self.assertEqual(
            (job.state, job.outcome, job.result), ("settled", "completed", "welcome ann")
        )

    def test_a_job_reads_a_row_the_test_created(self):
        user = User.objects.create(username="bob")
        enqueue("welcome:bob", lane=WELCOME_LANE, payload={"user": user.pk})
        self.assertEqual([r.result for r in run_jobs()], ["welcome bob"])
        self.assertEqual(run_jobs(), [])  # nothing left

    def test_a_failure_is_settled_failed_with_the_exception_and_its_reason(self):
        enqueue("mail:1", lane="i-broken")
        enqueue("mail:2", lane="i-unknown")
        failed, unknown = run_jobs()
        self.assertEqual(failed.outcome, "failed")
        self.assertIsInstance(failed.exception, ValueError)
        self.assertEqual(failed.failure_reason, "ValueError: no mail server for mail:1")
        self.assertIn("ValueError", watchdog.get_job("mail:1").traceback)
        self.assertEqual(unknown.outcome, "outcome_unknown")
        self.assertIsInstance(unknown.exception, OutcomeUnknown)

    def test_a_result_no_database_can_hold_is_dropped_as_a_worker_drops_it(self):
        enqueue("pdf:1", lane="i-unstorable")
        (run,) = run_jobs()
        self.assertEqual((run.outcome, run.result), ("completed", None))
        self.assertIn("result dropped", run.job.traceback)

    def test_raise_errors_reraises_once_the_job_has_settled(self):
        enqueue("mail:1", lane="i-broken")
        with self.assertRaisesMessage(ValueError, "no mail server for mail:1"):
            run_jobs(raise_errors=True)
        self.assertEqual(watchdog.get_job("mail:1").outcome, "failed")

    def test_retries_run_at_once_by_default_skipping_the_backoff(self):
        enqueue("sync:1", lane="i-flaky", payload={"succeed_at": 3})
        runs = run_jobs(raise_errors=True)  # a retried failure is not raised
        self.assertEqual(
            [(r.outcome, r.attempts) for r in runs],
            [("retrying", 1), ("retrying", 2), ("completed", 3)],
        )
        self.assertIsInstance(runs[0].exception, ConnectionError)
        self.assertEqual(runs[-1].result, 3)

    def test_retries_can_be_left_waiting_for_their_time(self):
        enqueue("sync:1", lane="i-flaky", payload={"succeed_at": 2})
        before = timezone.now()
        (run,) = run_jobs(retries="wait")
        self.assertEqual((run.outcome, run.attempts), ("retrying", 1))
        self.assertGreaterEqual(run.retry_at, before + timedelta(seconds=60))
        self.assertEqual([j.job_id for j in enqueued_jobs(lane="i-flaky")], ["sync:1"])
        self.assertEqual(run_jobs(), [])  # not due yet
        self.assertEqual(watchdog.queue_head("sync:1").job_id, "sync:1")

    def test_serial_queues_run_in_priority_then_enqueue_order(self):
        enqueue("a-low", queue="a")
        enqueue("a-high", queue="a", priority=5)
        enqueue("b-mid", queue="b", priority=1)
        enqueue("a-low-2", queue="a")
        self.assertEqual([r.job_id for r in run_jobs()], ["a-high", "b-mid", "a-low", "a-low-2"])

    def test_only_the_lanes_asked_for_run(self):
        enqueue("echo:1", payload=1)
        enqueue("mail:1", lane="i-broken")
        self.assertEqual([r.job_id for r in run_jobs(lanes=["i-echo"])], ["echo:1"])
        self.assertEqual([r.job_id for r in run_jobs(exclude_lanes=["i-broken"])], [])
        self.assertEqual([j.job_id for j in enqueued_jobs()], ["mail:1"])
        with self.assertRaisesMessage(InvalidInput, "lanes"):
            run_jobs(lanes=["no-such-lane"])

    def test_a_job_in_a_lane_without_handler_stays_queued(self):
        enqueue("orphan:1", lane="i-nobody-serves-this")
        self.assertEqual(run_jobs(), [])
        self.assertEqual(
            [j.job_id for j in enqueued_jobs(lane="i-nobody-serves-this")], ["orphan:1"]
        )

    def test_a_cancelled_queued_job_settles_cancelled_without_running(self):
        enqueue("echo:1")
        watchdog.cancel("echo:1")
        (run,) = run_jobs()
        self.assertEqual((run.outcome, run.ran, run.attempts), ("cancelled", False, 0))

    def test_queue_changed_is_sent_for_every_change(self):
        seen = []

        def receiver(sender, queue, head, settled, **kwargs):
            seen.append((queue, head.state, settled.job_id if settled else None))

        queue_changed.connect(receiver)
        self.addCleanup(queue_changed.disconnect, receiver)
        enqueue("echo:1", queue="q")
        run_jobs()
        self.assertEqual(seen[0], ("q", "queued", None))
        self.assertEqual(seen[-1], ("q", "idle", "echo:1"))

    def test_jobs_enqueued_by_jobs_run_in_the_same_call_up_to_max_runs(self):
        enqueue("link", lane="i-chain")
        with self.assertRaises(TooManyRuns):
            run_jobs(max_runs=5)
        self.assertEqual(Job.objects.filter(outcome="completed").count(), 5)

    def test_an_async_handler_runs_and_sees_the_tests_rows(self):
        user = User.objects.create(username="cy")
        enqueue("hello:cy", lane="i-async", payload={"user": user.pk})
        (run,) = run_jobs()
        self.assertEqual((run.outcome, run.result), ("completed", "hello cy"))

    def test_a_database_error_in_a_handler_leaves_the_test_transaction_usable(self):
        User.objects.create(username="taken")
        enqueue("dup:1", lane="i-duplicate-user", payload="taken")
        enqueue("echo:1", payload="after")
        failed, after = run_jobs()
        self.assertEqual(failed.outcome, "failed")
        self.assertIn("IntegrityError", failed.failure_reason)
        self.assertEqual((after.outcome, after.result), ("completed", "after"))
        self.assertEqual(User.objects.filter(username="taken").count(), 1)

    def test_delayed_jobs_run_when_due_or_at_once_when_asked(self):
        later = timezone.now() + timedelta(hours=1)
        enqueue("remind:1", run_after=later)
        self.assertEqual(run_jobs(), [])
        self.assertEqual([j.job_id for j in enqueued_jobs()], ["remind:1"])
        self.assertEqual([r.job_id for r in run_jobs(delayed="now")], ["remind:1"])

    def test_bad_options_are_refused_naming_them(self):
        for options, field in [
            ({"retries": "later"}, "retries"),
            ({"delayed": "soon"}, "delayed"),
            ({"max_runs": 0}, "max_runs"),
            ({"exclude_lanes": ["not a lane!"]}, "exclude_lanes"),
        ]:
            with self.subTest(field=field), self.assertRaisesMessage(InvalidInput, field):
                run_jobs(**options)


class WhatWasEnqueued(TestCase):
    def test_enqueued_jobs_lists_waiting_jobs_by_filter_in_enqueue_order(self):
        enqueue("echo:1", queue="q1", payload=1)
        enqueue("echo:2", queue="q2", payload=2)
        enqueue("mail:1", queue="q1", lane="i-broken")
        self.assertEqual([j.job_id for j in enqueued_jobs()], ["echo:1", "echo:2", "mail:1"])
        self.assertEqual([j.job_id for j in enqueued_jobs(queue="q1")], ["echo:1", "mail:1"])
        self.assertEqual([j.payload for j in enqueued_jobs(lane="i-echo")], [1, 2])
        self.assertEqual([j.job_id for j in enqueued_jobs(job_id="echo:2")], ["echo:2"])
        with self.assertRaisesMessage(InvalidInput, "lane"):
            enqueued_jobs(lane="not a lane!")

    def test_capture_enqueued_holds_what_the_block_enqueued(self):
        enqueue("before")
        with capture_enqueued() as captured:
            self.client.post("/signup", {"username": "dee"})
            enqueue("before")  # a duplicate: nothing new
        user = User.objects.get(username="dee")
        self.assertEqual([j.job_id for j in captured], [f"welcome:{user.pk}"])
        self.assertEqual(captured[0].payload, {"user": user.pk})
        self.assertEqual(captured[0].state, "queued")  # not run


class LifecycleSignalsInline(TestCase):
    """``run_jobs`` sends ``job_started`` and ``job_finished`` as a worker does: the sender
    is the registered handler; an unstarted (cancelled) job sends neither."""

    def setUp(self):
        self.sent = []

        def on_started(sender, job, worker_id, **_):
            self.sent.append(("started", sender, job.job_id, worker_id))

        def on_finished(sender, job, worker_id, outcome, duration, exception, **_):
            self.assertGreaterEqual(duration, 0)
            self.sent.append(("finished", sender, job.job_id, outcome, type(exception).__name__))

        for signal, receiver in ((job_started, on_started), (job_finished, on_finished)):
            signal.connect(receiver, weak=False)
            self.addCleanup(signal.disconnect, receiver)

    def test_each_run_sends_job_started_then_job_finished_with_its_outcome(self):
        enqueue("echo:1", payload="hi")
        enqueue("mail:1", lane="i-broken")
        enqueue("flaky:1", lane="i-flaky", payload={"succeed_at": 2})
        run_jobs()
        self.assertEqual(
            self.sent,
            [
                ("started", inline_handlers.echo, "echo:1", INLINE_WORKER),
                ("finished", inline_handlers.echo, "echo:1", "completed", "NoneType"),
                ("started", inline_handlers.broken, "mail:1", INLINE_WORKER),
                ("finished", inline_handlers.broken, "mail:1", "failed", "ValueError"),
                ("started", inline_handlers.flaky, "flaky:1", INLINE_WORKER),
                ("finished", inline_handlers.flaky, "flaky:1", "retrying", "ConnectionError"),
                ("started", inline_handlers.flaky, "flaky:1", INLINE_WORKER),
                ("finished", inline_handlers.flaky, "flaky:1", "completed", "NoneType"),
            ],
        )

    def test_a_job_cancelled_before_it_ran_sends_nothing(self):
        enqueue("echo:1")
        watchdog.cancel("echo:1")
        (run,) = run_jobs()
        self.assertFalse(run.ran)
        self.assertEqual(self.sent, [])
