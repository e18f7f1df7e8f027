"""Every vacuum of the job table cleans its indexes (PostgreSQL: ``vacuum_index_cleanup``).

Each job leaves a dead entry in the partial indexes of pending jobs it passed through (the
claim indexes, the queue heads, the running jobs), and a claim walks its index from the end
where the claimed jobs' dead entries gather. PostgreSQL's default (``auto``) skips the
indexes in a vacuum that finds dead rows on fewer than 2 % of the table's pages: on a table
with a long settled history that is every vacuum after a burst of thousands of jobs, and
each claim then walked every dead entry left since the table last had that many dead rows.
Turned on, each vacuum reads every index of the table: on a table of millions of jobs, more
reading per vacuum, for claims that stay index probes. MariaDB and SQLite have no such
setting: nothing is done there.
"""

from django.db import migrations

CLEAN_INDEXES = "ALTER TABLE watchdog_job SET (vacuum_index_cleanup = on)"
AS_THE_SERVER_DECIDES = "ALTER TABLE watchdog_job RESET (vacuum_index_cleanup)"


def _on_postgresql(schema_editor):
    return schema_editor.connection.vendor == "postgresql"


def forwards(apps, schema_editor):
    if _on_postgresql(schema_editor):
        schema_editor.execute(CLEAN_INDEXES)


def backwards(apps, schema_editor):
    if _on_postgresql(schema_editor):
        schema_editor.execute(AS_THE_SERVER_DECIDES)


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0016_job_running_by_worker'),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
