"""``django.tasks`` tasks on watchdog run through ``django_watchdog.testing.run_jobs`` too:
the task lanes' handler is the real task runner, and the results read back through Django."""

from __future__ import annotations

from django.test import TestCase

from django_watchdog.tasks.mapping import lane_of
from django_watchdog.testing import enqueued_jobs, run_jobs
from tests.tasks_app import tasks
from tests.tasks_app.framework import TaskResultStatus

#: The watchdog lane that serves the task queue ``tasks.LANE``.
LANE = lane_of(tasks.LANE)


class TasksRunInline(TestCase):
    def test_enqueued_tasks_run_and_their_results_read_back(self):
        added = tasks.add.enqueue(2, 3)
        added_async = tasks.add_async.enqueue(4, 5)
        failing = tasks.failing.enqueue("no luck")
        self.assertEqual(
            {j.job_id for j in enqueued_jobs(lane=LANE)},
            {added.id, added_async.id, failing.id},
        )

        runs = {r.job_id: r for r in run_jobs(lanes=[LANE])}

        self.assertEqual((runs[added.id].outcome, runs[added.id].result), ("completed", 5))
        self.assertEqual(runs[added_async.id].result, 9)
        self.assertIsInstance(runs[failing.id].exception, tasks.TaskBoom)
        added.refresh()
        self.assertEqual((added.status, added.return_value), (TaskResultStatus.SUCCESSFUL, 5))
        failed = tasks.failing.get_result(failing.id)
        self.assertEqual(failed.status, TaskResultStatus.FAILED)
