from django.db import models


class Projection(models.Model):
    """A row a queue_changed receiver writes inside the watchdog transaction."""

    queue = models.CharField(max_length=256, unique=True)
    head_state = models.CharField(max_length=16)
    head_job_id = models.CharField(max_length=256, null=True)
    last_settled = models.CharField(max_length=256, null=True)
