"""MariaDB: one counter for job ids and places in a queue's order, as on PostgreSQL.

On PostgreSQL a job's id comes from the id column's sequence, a ready job takes its id as
its position, and a delayed job that comes due draws its position from that sequence too:
one counter, so a queue's order is the order of enqueues and promotions. MariaDB's
``AUTO_INCREMENT`` cannot be drawn from by an ``UPDATE``, so on MariaDB only this adds the
sequence ``watchdog_job_id_seq`` (MariaDB 10.3+), starting above every id and position
stored or handed out so far; the store's enqueue writes each new job's id from it and a
promotion draws its position from it. The id column keeps its ``AUTO_INCREMENT`` (no table
copy): the store gives every id itself. On every other database this migration does nothing.
"""

from django.db import migrations

SEQUENCE = "watchdog_job_id_seq"
#: Above every stored id and position, and above every id ``AUTO_INCREMENT`` gave (rows
#: deleted since included): no id is handed out twice.
START = """
SELECT GREATEST(
    COALESCE((SELECT MAX(id) FROM watchdog_job), 0),
    COALESCE((SELECT MAX(position) FROM watchdog_job), 0),
    COALESCE((SELECT AUTO_INCREMENT - 1 FROM information_schema.TABLES
               WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'watchdog_job'), 0)) + 1
"""


def _on_mariadb(schema_editor):
    return schema_editor.connection.vendor == "mysql"


def forwards(apps, schema_editor):
    if not _on_mariadb(schema_editor):
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(START)
        (start,) = cursor.fetchone()
    schema_editor.execute(f"CREATE SEQUENCE `{SEQUENCE}` START WITH {int(start)}")


def backwards(apps, schema_editor):
    """``AUTO_INCREMENT`` gives ids again: it is already above every id the sequence gave."""
    if not _on_mariadb(schema_editor):
        return
    schema_editor.execute(f"DROP SEQUENCE `{SEQUENCE}`")


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0010_job_trace_context'),
    ]

    operations = [
        # DDL, which MariaDB cannot roll back: not inside a transaction.
        migrations.RunPython(forwards, backwards, atomic=False, elidable=False),
    ]
