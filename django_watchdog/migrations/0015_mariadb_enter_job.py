"""MariaDB: an enqueue of one job as a stored procedure, parsed once per connection.

The store enqueues one job with one statement (``mariadb_enqueue``). Sent as an anonymous
block (``BEGIN NOT ATOMIC``), the server parses the whole block on every call, which cost it
about as much as the insert itself; a procedure is parsed once per connection and kept. So
on MariaDB only this adds ``watchdog_enter_job``: what the block does, with the job's values
as parameters and ``alone`` choosing the block's two forms (a transaction of its own for a
caller in autocommit; a savepoint of its own inside the caller's transaction). It runs with
the caller's privileges (``SQL SECURITY INVOKER``); the user that migrates is granted
``EXECUTE`` on it by the server, another application user needs that grant. Where the
procedure is missing or refused, the store sends the block. On every other database this
migration does nothing.

The body is written here, not read from the store: a migration is frozen. A later change
of the procedure is a migration of its own (``CREATE OR REPLACE``).
"""

from django.db import migrations

NAME = "watchdog_enter_job"
TEXT = "CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"

PROCEDURE = f"""
CREATE OR REPLACE PROCEDURE {NAME}(
    alone BOOLEAN,
    p_job_id VARCHAR(256) {TEXT},
    p_queue VARCHAR(256) {TEXT},
    p_lane VARCHAR(64) {TEXT},
    p_priority BIGINT,
    p_payload LONGTEXT CHARACTER SET utf8mb4,
    p_max_recoveries BIGINT,
    p_delayed BOOLEAN,
    p_run_after DATETIME(6),
    p_retry_policy LONGTEXT CHARACTER SET utf8mb4,
    p_timeout DOUBLE,
    p_trace_context LONGTEXT CHARACTER SET utf8mb4,
    p_created_at DATETIME(6)
)
SQL SECURITY INVOKER
BEGIN
    DECLARE promoted BOOLEAN DEFAULT NOT p_delayed;
    DECLARE EXIT HANDLER FOR 1213, 1205 BEGIN
        IF alone THEN ROLLBACK; END IF;
        RESIGNAL;
    END;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN
        IF alone THEN ROLLBACK; ELSE ROLLBACK TO SAVEPOINT watchdog_enqueue; END IF;
        RESIGNAL;
    END;
    IF alone THEN START TRANSACTION; ELSE SAVEPOINT watchdog_enqueue; END IF;
    SET @watchdog_queue_held = FALSE;
    INSERT INTO watchdog_queue (name, created_at) VALUES (p_queue, p_created_at)
        ON DUPLICATE KEY UPDATE name = IF(@watchdog_queue_held := TRUE, name, name);
    IF promoted AND @watchdog_queue_held THEN
        SET promoted = NOT EXISTS (
                SELECT 1 FROM watchdog_job FORCE INDEX (watchdog_job_head)
                 WHERE queue = p_queue
                   AND (state = 'running'
                        OR state = 'queued' AND `delayed` = FALSE AND priority >= p_priority))
            AND NOT EXISTS (
                SELECT 1 FROM watchdog_job FORCE INDEX (watchdog_job_retrying)
                 WHERE queue = p_queue AND state = 'queued' AND retry_at IS NOT NULL);
    END IF;
    INSERT INTO watchdog_job
        (id, job_id, queue, lane, priority, payload, max_recoveries, `delayed`, run_after,
         retry_policy, timeout, trace_context, ready, position, state, recovery_count,
         attempts, enqueued_at)
    VALUES (NEXT VALUE FOR watchdog_job_id_seq, p_job_id, p_queue, p_lane, p_priority,
            p_payload, p_max_recoveries, p_delayed, p_run_after, p_retry_policy, p_timeout,
            p_trace_context, promoted, CASE WHEN p_delayed THEN NULL ELSE id END, 'queued',
            0, 0, UTC_TIMESTAMP(6))
    RETURNING id, job_id, enqueued_at, ready;
    IF promoted AND @watchdog_queue_held THEN
        UPDATE watchdog_job FORCE INDEX (watchdog_job_ready) SET ready = FALSE
         WHERE queue = p_queue AND ready = TRUE AND cancellation_id IS NULL
           AND id <> PREVIOUS VALUE FOR watchdog_job_id_seq;
    END IF;
    IF alone THEN COMMIT; ELSE RELEASE SAVEPOINT watchdog_enqueue; END IF;
END
"""


def _on_mariadb(schema_editor):
    return schema_editor.connection.vendor == "mysql"


def forwards(apps, schema_editor):
    if _on_mariadb(schema_editor):
        schema_editor.execute(PROCEDURE)


def backwards(apps, schema_editor):
    """The store sends the block again where the procedure is missing."""
    if _on_mariadb(schema_editor):
        schema_editor.execute(f"DROP PROCEDURE IF EXISTS {NAME}")


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0014_job_queue_delayed_index'),
    ]

    operations = [
        # DDL, which MariaDB cannot roll back: not inside a transaction.
        migrations.RunPython(forwards, backwards, atomic=False, elidable=False),
    ]
