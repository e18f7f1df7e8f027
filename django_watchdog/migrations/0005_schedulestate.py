from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_watchdog', '0004_job_order_delays_retries'),
    ]

    operations = [
        migrations.CreateModel(
            name='ScheduleState',
            fields=[
                ('name', models.CharField(max_length=200, primary_key=True, serialize=False)),
                ('handled_until', models.DateTimeField()),
                ('last_tick', models.DateTimeField(blank=True, null=True)),
                ('updated_at', models.DateTimeField()),
            ],
            options={
                'db_table': 'watchdog_schedule',
                'ordering': ('name',),
            },
        ),
    ]
