"""``watchdog_job_lane_pending`` takes the pending jobs by ``outcome IS NULL``.

The same rows as ``state IN ('queued', 'running')`` (the state rules say so), but a
condition no statement of the hot path says: with statistics gathered when no job was
queued, PostgreSQL found a queue's next head, in every settle and in every enqueue into a
queue with jobs, by walking every queued job in this index. Readers of pending jobs say
``PENDING_JOBS`` (``models.py``) to use it. On MariaDB, which has no partial index, the
index (migration 0009) keeps its columns and stays as it is.
"""

from django.db import migrations, models

NAME = "watchdog_job_lane_pending"
COLUMNS = ["lane", "state", "id"]


class NotOnMariadb:
    """An index operation whose schema change MariaDB (Django's ``mysql``) skips."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "mysql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "mysql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class RemoveIndex(NotOnMariadb, migrations.RemoveIndex):
    pass


class AddIndex(NotOnMariadb, migrations.AddIndex):
    pass


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0012_job_settled_at_index'),
    ]

    operations = [
        RemoveIndex(model_name='job', name=NAME),
        AddIndex(
            model_name='job',
            index=models.Index(
                condition=models.Q(('outcome__isnull', True)), fields=COLUMNS, name=NAME
            ),
        ),
    ]
