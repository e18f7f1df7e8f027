"""PostgreSQL: the job table's fifteen row rules checked by one function, not fifteen ``CHECK``\\s.

PostgreSQL prepares a table's ``CHECK`` constraints again in every statement that writes a
row of it: it reads each stored expression back from its text form, simplifies it and
compiles it, whatever the expression says. The job table's fifteen rules cost that three
times per job (the settle, the next head readied, the claim) and once per enqueue: a third
to nearly half of the server's CPU for a one-row ``UPDATE`` of that table
(``bench.rule_costs``). One constraint calling one PL/pgSQL function is one small expression
to prepare; the function's body is parsed once per connection.

So on PostgreSQL only, this replaces the fifteen constraints by ``watchdog_job_rules``,
which calls ``watchdog_job_broken_rule`` on the row's columns. The function checks the same
expressions, as the server stored them, in the order PostgreSQL checks constraints (by
name), and answers the name of the first rule the row breaks, or ``NULL``; called with
``refuse`` true, it raises ``check_violation`` instead, naming the broken rule as its
constraint with the message PostgreSQL's own check would give. A rule whose expression is
``NULL`` passes, as a ``CHECK`` does. So a bad row is refused with the same error class,
code, constraint name and message as before. Django's model state keeps the fifteen
constraints (``Job.Meta.constraints``): they still hold, and still name the rules for SQLite
and MariaDB, where nothing changes.

The body is written here, not read from the store: a migration is frozen. A later change of
a rule is a migration of its own: on PostgreSQL it replaces the function (``CREATE OR
REPLACE FUNCTION``) instead of the ``RemoveConstraint``/``AddConstraint`` Django writes,
which would find no such constraint here; the test that compares the function with the
model's constraints fails until it does. Reversed, this drops the function and its
constraint and adds the fifteen back from the model's state.
"""

from django.db import migrations
from django.db.models import CheckConstraint

FUNCTION = "watchdog_job_broken_rule"
CONSTRAINT = "watchdog_job_rules"

#: The columns the rules read, as the function's parameters, in this order.
COLUMNS = (
    ("attempts", "bigint"),
    ("delayed", "boolean"),
    ('"position"', "bigint"),
    ("ready", "boolean"),
    ("run_after", "timestamptz"),
    ("state", "varchar"),
    ("max_recoveries", "bigint"),
    ("job_id", "varchar"),
    ("queue", "varchar"),
    ("lane", "varchar"),
    ("outcome", "varchar"),
    ("priority", "bigint"),
    ("claim_token", "varchar"),
    ("failure_reason", "varchar"),
    ("recovery_count", "bigint"),
    ("timeout", "double precision"),
)

#: Each rule's name and expression, as PostgreSQL stored the ``CHECK`` it replaces
#: (``pg_get_constraintdef``), in the order it checked them: by name.
RULES = (
    ("watchdog_job_attempts_not_negative", "attempts >= 0"),
    (
        "watchdog_job_delayed_unpositioned",
        """((NOT delayed) AND ("position" IS NOT NULL))
        OR (delayed AND ("position" IS NULL) AND (NOT ready) AND (run_after IS NOT NULL)
            AND ((state)::text = 'queued'::text))""",
    ),
    (
        "watchdog_job_max_recoveries_not_negative",
        "(max_recoveries IS NULL) OR (max_recoveries >= 0)",
    ),
    (
        "watchdog_job_names_not_empty",
        """(NOT ((job_id)::text = ''::text)) AND (NOT ((queue)::text = ''::text))
        AND (NOT ((lane)::text = ''::text))""",
    ),
    (
        "watchdog_job_outcome_known",
        """(outcome IS NULL) OR ((outcome)::text = ANY ((ARRAY['completed'::character varying,
        'failed'::character varying, 'cancelled'::character varying,
        'outcome_unknown'::character varying, 'interrupted'::character varying])::text[]))""",
    ),
    (
        "watchdog_job_priority_range",
        "(priority >= '-9007199254740991'::bigint) AND (priority <= '9007199254740991'::bigint)",
    ),
    (
        "watchdog_job_queued_unclaimed",
        "(NOT ((state)::text = 'queued'::text)) OR ((claim_token IS NULL) AND (outcome IS NULL))",
    ),
    ("watchdog_job_ready_is_queued", "(NOT ready) OR ((state)::text = 'queued'::text)"),
    (
        "watchdog_job_reason_iff_failed",
        """((failure_reason IS NOT NULL) AND ((outcome)::text = ANY ((ARRAY['failed'::character
        varying, 'interrupted'::character varying])::text[])) AND (outcome IS NOT NULL))
        OR (((NOT (((outcome)::text = ANY ((ARRAY['failed'::character varying,
        'interrupted'::character varying])::text[])) AND (outcome IS NOT NULL)))
        OR (outcome IS NULL)) AND (failure_reason IS NULL))""",
    ),
    (
        "watchdog_job_reason_not_empty",
        """(failure_reason IS NULL)
        OR (NOT (((failure_reason)::text = ''::text) AND (failure_reason IS NOT NULL)))""",
    ),
    ("watchdog_job_recovery_count_not_negative", "recovery_count >= 0"),
    (
        "watchdog_job_running_claimed",
        """(NOT ((state)::text = 'running'::text))
        OR ((claim_token IS NOT NULL) AND (outcome IS NULL))""",
    ),
    (
        "watchdog_job_settled_has_outcome",
        "(NOT ((state)::text = 'settled'::text)) OR (outcome IS NOT NULL)",
    ),
    (
        "watchdog_job_state_known",
        """(state)::text = ANY ((ARRAY['queued'::character varying,
        'running'::character varying, 'settled'::character varying])::text[])""",
    ),
    ("watchdog_job_timeout_positive", "(timeout IS NULL) OR (timeout > (0.0)::double precision)"),
)

_PARAMETERS = ",\n    ".join(f"{name} {kind}" for name, kind in COLUMNS)
_CHECKS = "\n".join(
    f"    {'IF' if index == 0 else 'ELSIF'} NOT ({expression}) THEN broken := '{name}';"
    for index, (name, expression) in enumerate(RULES)
)

CREATE_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {FUNCTION}(
    {_PARAMETERS},
    refuse boolean
) RETURNS text LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $rules$
DECLARE
    broken text;
BEGIN
{_CHECKS}
    END IF;
    IF broken IS NOT NULL AND refuse THEN
        RAISE check_violation USING
            MESSAGE = format('new row for relation "watchdog_job" violates check constraint "%s"',
                             broken),
            CONSTRAINT = broken, TABLE = 'watchdog_job';
    END IF;
    RETURN broken;
END
$rules$
"""

_ARGUMENTS = ", ".join(name for name, _kind in COLUMNS)
ADD_CONSTRAINT = (
    f"ALTER TABLE watchdog_job ADD CONSTRAINT {CONSTRAINT} "
    f"CHECK ({FUNCTION}({_ARGUMENTS}, true) IS NULL)"
)
DROP_CONSTRAINT = f"ALTER TABLE watchdog_job DROP CONSTRAINT {CONSTRAINT}"
DROP_FUNCTION = f"DROP FUNCTION {FUNCTION}({', '.join(kind for _name, kind in COLUMNS)}, boolean)"


def _on_postgresql(schema_editor):
    return schema_editor.connection.vendor == "postgresql"


def _checks(apps):
    job = apps.get_model("django_watchdog", "Job")
    rules = {name for name, _expression in RULES}
    return job, [c for c in job._meta.constraints if isinstance(c, CheckConstraint) and c.name in rules]


def forwards(apps, schema_editor):
    if not _on_postgresql(schema_editor):
        return
    job, checks = _checks(apps)
    schema_editor.execute(CREATE_FUNCTION, params=None)  # its `%s` is format()'s
    for check in checks:
        schema_editor.remove_constraint(job, check)
    schema_editor.execute(ADD_CONSTRAINT)


def backwards(apps, schema_editor):
    if not _on_postgresql(schema_editor):
        return
    job, checks = _checks(apps)
    schema_editor.execute(DROP_CONSTRAINT)
    schema_editor.execute(DROP_FUNCTION)
    for check in checks:
        schema_editor.add_constraint(job, check)


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0017_job_vacuum_index_cleanup'),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, elidable=False),
    ]
