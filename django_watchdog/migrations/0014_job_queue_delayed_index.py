"""``watchdog_job_queue_delayed``: a queue's delayed jobs, by due time.

Whether a queue has pending jobs (the queue list's filter, per queue row), how many of its
jobs are delayed (the queue list, ``watchdog status``) and whether an idle task queue has
any (retention) each walked the ``watchdog_job_due`` index over every delayed job of every
queue. Delayed jobs only, so an enqueue of a job to run now writes no entry. On MariaDB,
which has no partial index, nothing is built: the head index there leads with ``queue``,
``state`` and ``delayed`` (migration 0009) and already finds a queue's delayed jobs.
"""

from django.db import migrations, models

NAME = "watchdog_job_queue_delayed"


class AddQueueDelayedIndex(migrations.AddIndex):
    """``AddIndex``, but nothing on MariaDB (Django's ``mysql``), where the head index serves."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "mysql":
            return
        super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "mysql":
            return
        super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0013_lane_pending_by_outcome'),
    ]

    operations = [
        AddQueueDelayedIndex(
            model_name='job',
            index=models.Index(
                condition=models.Q(('delayed', True)),
                fields=['queue', 'run_after'],
                name=NAME,
            ),
        ),
    ]
