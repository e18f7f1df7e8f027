"""``watchdog_job_ready`` takes a queue's ready jobs by ``cancellation_id IS NULL`` too.

Its readers ask for a queue's ready head (the admin's "behind queued job …", SQLite's
demotion of a displaced head), which names no cancellation; a claim, which takes cancelled
jobs as well, cannot prove that term, so only the claim indexes serve it now. Both had the
same condition: with statistics gathered when no job was ready (an idle server when
autovacuum looked), PostgreSQL called every index of ready jobs empty and often chose this
one, the smallest, for the claim, reading every ready job, joining each to its queue and
sorting them, in every claim. On MariaDB, which has no partial index, the index (migration
0009) stays as it is (the operations of migration 0013).
"""

import importlib

from django.db import migrations, models

NAME = "watchdog_job_ready"
operations_of_0013 = importlib.import_module(
    "django_watchdog.migrations.0013_lane_pending_by_outcome"
)


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0018_job_rules_one_function'),
    ]

    operations = [
        operations_of_0013.RemoveIndex(model_name='job', name=NAME),
        operations_of_0013.AddIndex(
            model_name='job',
            index=models.Index(
                condition=models.Q(('cancellation_id__isnull', True), ('ready', True)),
                fields=['queue'],
                name=NAME,
            ),
        ),
    ]
