"""``Job.trace_context``: the trace context a job was enqueued in (``django_watchdog.tracing``).

A nullable JSON column. On MariaDB it is added with the exact collation every watchdog text
column has there (0009): Django would give it ``utf8mb4_bin``, and changing a column's
collation afterwards copies the whole table.
"""

from django.db import migrations, models

MARIADB_COLUMN = (
    "`trace_context` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin DEFAULT NULL"
    " CHECK (json_valid(`trace_context`))"
)


class AddTraceContext(migrations.AddField):
    """``AddField``, spelt by hand on MariaDB (Django's ``mysql`` backend)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        connection = schema_editor.connection
        if connection.vendor == "mysql" and connection.mysql_is_mariadb:
            schema_editor.execute(f"ALTER TABLE `watchdog_job` ADD COLUMN {MARIADB_COLUMN}")
            return
        super().database_forwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0009_mariadb_schema'),
    ]

    operations = [
        AddTraceContext(
            model_name='job',
            name='trace_context',
            field=models.JSONField(blank=True, null=True),
        ),
    ]
