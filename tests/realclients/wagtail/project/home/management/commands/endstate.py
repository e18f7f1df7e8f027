"""The site's end state as JSON: pages, reference index, search index, media files, focal
points, the index rows of an object which no longer exists (stale), and the task jobs that
did not complete. ``--drain`` first waits (polling, with a deadline) until no task job is
queued or running."""

import json
import os
import time

from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.core.management.base import BaseCommand, CommandError
from wagtail.images import get_image_model
from wagtail.models import Page, ReferenceIndex
from wagtail.search.models import IndexEntry

from django_watchdog.models import Job


def label(content_type_id: int, object_id: object) -> str:
    model = ContentType.objects.get_for_id(content_type_id).model_class()
    name = model._meta.label_lower
    found = model._default_manager.filter(pk=object_id).first()
    return f"{name}:{found}" if found is not None else f"{name}:MISSING"


def wait_for_drain(timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while Job.objects.filter(state__in=["queued", "running"]).exists():
        if time.monotonic() > deadline:
            raise CommandError(f"tasks still pending after {timeout} s")
        time.sleep(0.2)  # polling for the drain, with a deadline


class Command(BaseCommand):
    help = "Print the end state as JSON."

    def add_arguments(self, parser):
        parser.add_argument("--drain", type=float, metavar="SECONDS", dest="drain_timeout")

    def handle(self, *args, drain_timeout=None, **options):
        if drain_timeout:
            wait_for_drain(drain_timeout)
        pages = sorted(
            [p.url_path, p.title, p.live, p.has_unpublished_changes]
            for p in Page.objects.filter(depth__gt=2)
        )
        references = sorted(
            [
                label(r.base_content_type_id, r.object_id),
                r.model_path,
                r.content_path,
                label(r.to_content_type_id, r.to_object_id),
            ]
            for r in ReferenceIndex.objects.all()
        )
        search = sorted(
            [label(e.content_type_id, e.object_id), e.title] for e in IndexEntry.objects.all()
        )
        media = sorted(
            os.path.relpath(os.path.join(root, name), settings.MEDIA_ROOT)
            for root, _, names in os.walk(settings.MEDIA_ROOT)
            for name in names
        )
        focal = sorted(
            [i.title, i.focal_point_x, i.focal_point_y, i.focal_point_width, i.focal_point_height]
            for i in get_image_model().objects.all()
        )
        stale = sorted(
            [kind, *row]
            for kind, rows in (("reference", references), ("search", search))
            for row in rows
            if row[0].endswith(":MISSING")
        )
        state = {
            "pages": pages,
            "references": references,
            "search": search,
            "media": media,
            "focal_points": focal,
        }
        failures = sorted(
            [j.payload.get("function"), (j.failure_reason or "").split(":")[0]]
            for j in Job.objects.filter(state="settled").exclude(outcome="completed")
        )
        report = {"state": state, "stale": stale, "failures": failures, "jobs": Job.objects.count()}
        self.stdout.write(json.dumps(report))
