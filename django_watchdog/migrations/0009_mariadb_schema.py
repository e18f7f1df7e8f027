"""The schema's rules on MariaDB, which has neither partial indexes nor exact text by default.

On every other database this migration does nothing. On MariaDB (Django's ``mysql``
backend) Django creates each partial index without its condition and skips each partial
unique constraint, and text columns take the database's default collation, usually
case- and accent-insensitive and PAD SPACE (``"A"``, ``"a"`` and ``"a "`` compare equal).
So, on MariaDB only:

- every watchdog table is converted to ``utf8mb4`` with the ``utf8mb4_nopad_bin``
  collation: job ids, queues, lanes and cancellation ids compare byte for byte;
- the serial-queue rule (at most one running job per queue) is a unique index over a
  stored generated column that holds the queue while the job runs and is NULL otherwise
  (a unique index allows any number of NULLs): ``watchdog_job_one_running_per_queue``;
- a cancellation id names one job: a unique index on ``cancellation_id`` (NULLs apart);
- each partial index is rebuilt under its name with its condition's columns leading, so
  the same lookups find the same rows by an index prefix; the two pending-feed indexes use
  a stored generated column that holds ``feed_position`` only while the job is pending.

The column lists are written here, not read from the model: a migration is frozen.
"""

from django.db import migrations

TABLES = (
    "watchdog_job",
    "watchdog_queue",
    "watchdog_pruned_job",
    "watchdog_worker",
    "watchdog_schedule",
)
COLLATION = "utf8mb4_nopad_bin"

GENERATED_COLUMNS = {
    "running_queue": (
        f"VARCHAR(256) CHARACTER SET utf8mb4 COLLATE {COLLATION} "
        "AS (CASE WHEN `state` = 'running' THEN `queue` END) STORED"
    ),
    "feed_pending_position": (
        "BIGINT AS (CASE WHEN `state` IN ('queued', 'running') THEN `feed_position` END) STORED"
    ),
}

UNIQUE_INDEXES = {
    "watchdog_job_one_running_per_queue": "`running_queue`",
    "watchdog_job_cancellation_id_unique": "`cancellation_id`",
}

#: Each partial index of migrations 0001-0008, by name: the MariaDB columns (the
#: condition's equality columns first) and the columns Django created it with.
INDEXES = {
    "watchdog_job_claim": ("`ready`, `priority` DESC, `position`", "`priority` DESC, `position`"),
    "watchdog_job_claim_lane": (
        "`ready`, `lane`, `priority` DESC, `position`",
        "`lane`, `priority` DESC, `position`",
    ),
    "watchdog_job_head": (
        "`queue`, `state`, `delayed`, `priority` DESC, `position`",
        "`queue`, `priority` DESC, `position`",
    ),
    "watchdog_job_retrying": ("`queue`, `state`, `retry_at`", "`queue`"),
    "watchdog_job_ready": ("`queue`, `ready`", "`queue`"),
    "watchdog_job_due": ("`delayed`, `run_after`", "`run_after`"),
    "watchdog_job_retry_due": ("`state`, `retry_at`", "`retry_at`"),
    "watchdog_job_feed_at": ("`state`, `feed_position`", "`feed_position`"),
    "watchdog_job_feed_lane_at": ("`state`, `lane`, `feed_position`", "`lane`, `feed_position`"),
    "watchdog_job_feed_pending_at": ("`feed_pending_position`", "`feed_position`"),
    "watchdog_job_feed_lane_pend_at": (
        "`lane`, `feed_pending_position`",
        "`lane`, `feed_position`",
    ),
    "watchdog_job_unpositioned": ("`feed_position`, `delayed`, `id`", "`id`"),
    "watchdog_job_lane_pending": ("`lane`, `state`, `id`", "`lane`, `state`, `id`"),
    "watchdog_job_running": ("`state`, `claimed_by`", "`claimed_by`"),
    "watchdog_job_queue_latest": ("`queue`, `state`, `position` DESC", "`queue`, `position` DESC"),
    "watchdog_job_unsuccessful": ("`outcome`, `lane`, `id` DESC", "`outcome`, `lane`, `id` DESC"),
    "watchdog_job_reruns": ("`rerun_of`", "`rerun_of`"),
}


def _on_mariadb(schema_editor):
    return schema_editor.connection.vendor == "mysql"


def forwards(apps, schema_editor):
    if not _on_mariadb(schema_editor):
        return
    for table in TABLES:
        schema_editor.execute(
            f"ALTER TABLE `{table}` CONVERT TO CHARACTER SET utf8mb4 COLLATE {COLLATION}"
        )
    changes = [f"ADD COLUMN `{name}` {kind}" for name, kind in GENERATED_COLUMNS.items()]
    changes += [f"ADD UNIQUE INDEX `{name}` ({cols})" for name, cols in UNIQUE_INDEXES.items()]
    for name, (columns, _) in INDEXES.items():
        changes += [f"DROP INDEX `{name}`", f"ADD INDEX `{name}` ({columns})"]
    schema_editor.execute(f"ALTER TABLE `watchdog_job` {', '.join(changes)}")


def backwards(apps, schema_editor):
    """Back to what Django built; the exact collation stays (it refuses no row)."""
    if not _on_mariadb(schema_editor):
        return
    changes = []
    for name, (_, columns) in INDEXES.items():
        changes += [f"DROP INDEX `{name}`", f"ADD INDEX `{name}` ({columns})"]
    changes += [f"DROP INDEX `{name}`" for name in UNIQUE_INDEXES]
    changes += [f"DROP COLUMN `{name}`" for name in GENERATED_COLUMNS]
    schema_editor.execute(f"ALTER TABLE `watchdog_job` {', '.join(changes)}")


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0008_job_cancellation_requester_reruns'),
    ]

    operations = [
        # DDL, which MariaDB cannot roll back: not inside a transaction.
        migrations.RunPython(forwards, backwards, atomic=False, elidable=False),
    ]
