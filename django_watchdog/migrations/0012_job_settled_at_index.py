"""``watchdog_job_settled_at``: settled jobs by ``settled_at``, for retention's bounded batches.

A prune walks the settled jobs older than its age from the oldest, a batch at a time, and
stops at the age: it never reads the newer ones. On MariaDB, which has no partial index,
the condition's column leads (as migration 0009 rebuilds the others).
"""

from django.db import migrations, models

NAME = "watchdog_job_settled_at"
MARIADB_COLUMNS = "`state`, `settled_at`, `id`"


class AddSettledAtIndex(migrations.AddIndex):
    """``AddIndex``, with the condition's column leading on MariaDB (Django's ``mysql``)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "mysql":
            schema_editor.execute(
                f"ALTER TABLE `watchdog_job` ADD INDEX `{NAME}` ({MARIADB_COLUMNS})"
            )
            return
        super().database_forwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0011_mariadb_job_id_sequence'),
    ]

    operations = [
        AddSettledAtIndex(
            model_name='job',
            index=models.Index(
                condition=models.Q(('state', 'settled')),
                fields=['settled_at', 'id'],
                name=NAME,
            ),
        ),
    ]
