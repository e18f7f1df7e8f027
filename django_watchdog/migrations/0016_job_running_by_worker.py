"""``watchdog_job_running`` takes a worker's running jobs by ``claimed_by IS NOT NULL`` too.

Every reader of it names a worker (``claimed_by = …``, ``claimed_by IN (…)``), which
proves that term on PostgreSQL and on SQLite; a queue's check for a running job (the head
rule, in every settle and enqueue) names the queue only, so only
``watchdog_job_one_running_per_queue`` serves it now. Both indexes had the same condition:
with statistics gathered when no job ran, PostgreSQL called both empty and walked this one,
every running job, to answer for one queue. On MariaDB, which has no partial index, the
index (migration 0009) stays as it is (the operations of migration 0013).
"""

import importlib

from django.db import migrations, models

NAME = "watchdog_job_running"
operations_of_0013 = importlib.import_module(
    "django_watchdog.migrations.0013_lane_pending_by_outcome"
)


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0015_mariadb_enter_job'),
    ]

    operations = [
        operations_of_0013.RemoveIndex(model_name='job', name=NAME),
        operations_of_0013.AddIndex(
            model_name='job',
            index=models.Index(
                condition=models.Q(('claimed_by__isnull', False), ('state', 'running')),
                fields=['claimed_by'],
                name=NAME,
            ),
        ),
    ]
