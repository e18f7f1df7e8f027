"""One intent id per job (unique, as the seed), ``latest_settled`` by queue order, and the
table of pruned job ids ``WATCHDOG["ID_RETENTION"]`` keeps.

Existing rows are made to fit first, keeping every intent (a cancelled job stays
cancelled): a default intent of a job id longer than 249 characters (``cancel:`` + the id,
over 256 characters) becomes today's default for that id, so a repeated plain ``cancel()``
still replays; where several jobs hold one intent id, the job that has held it longest
(lowest id) keeps it and each other job's is renamed ``cancel#dup:<job pk>:<sha256 of the
id>``: still recorded, so those jobs still cancel, but a repeat of the shared id on them now
answers ``conflict``.
"""

import hashlib

from django.db import migrations, models


def _digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def fit_intents(apps, schema_editor):
    Job = apps.get_model("django_watchdog", "Job")
    jobs = Job.objects.using(schema_editor.connection.alias)
    for pk, job_id, intent in jobs.filter(cancellation_id__isnull=False).values_list(
        "pk", "job_id", "cancellation_id"
    ).iterator():
        if len(intent) > 256:
            jobs.filter(pk=pk).update(cancellation_id=f"cancel#sha256:{_digest(job_id)}")
    shared = (
        jobs.filter(cancellation_id__isnull=False)
        .values("cancellation_id")
        .annotate(n=models.Count("id"))
        .filter(n__gt=1)
        .values_list("cancellation_id", flat=True)
    )
    for intent in list(shared):
        holders = jobs.filter(cancellation_id=intent).order_by("pk").values_list("pk", flat=True)
        for pk in list(holders)[1:]:
            jobs.filter(pk=pk).update(cancellation_id=f"cancel#dup:{pk}:{_digest(intent)}")


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0006_feed_indexes_positioned_only'),
    ]

    operations = [
        migrations.CreateModel(
            name='PrunedJob',
            fields=[
                ('job_id', models.CharField(max_length=256, primary_key=True, serialize=False)),
                ('queue', models.CharField(max_length=256)),
                ('lane', models.CharField(max_length=64)),
                ('outcome', models.CharField(choices=[('completed', 'completed'), ('failed', 'failed'), ('cancelled', 'cancelled'), ('outcome_unknown', 'outcome_unknown'), ('interrupted', 'interrupted')], max_length=16)),
                ('enqueued_at', models.DateTimeField()),
                ('settled_at', models.DateTimeField()),
            ],
            options={
                'db_table': 'watchdog_pruned_job',
                'ordering': ('settled_at',),
            },
        ),
        migrations.RemoveIndex(
            model_name='job',
            name='watchdog_job_queue_settled',
        ),
        migrations.AddIndex(
            model_name='job',
            index=models.Index(condition=models.Q(('state', 'settled')), fields=['queue', '-position'], name='watchdog_job_queue_latest'),
        ),
        migrations.RunPython(fit_intents, migrations.RunPython.noop, elidable=True),
        migrations.AddConstraint(
            model_name='job',
            constraint=models.UniqueConstraint(condition=models.Q(('cancellation_id__isnull', False)), fields=('cancellation_id',), name='watchdog_job_cancellation_id_unique'),
        ),
        migrations.AddIndex(
            model_name='prunedjob',
            index=models.Index(fields=['settled_at'], name='watchdog_pruned_job_settled'),
        ),
    ]
