"""One round of an editor's work, in phases: ``edit`` creates, publishes and edits pages,
images, documents and snippets; ``delete`` deletes some. Deterministic, so two sites given
the same rounds end alike. ``race`` (watchdog only, with the worker's race gate: see
``home/race.py``) creates an author and deletes it while its index tasks are running,
between their read of it and their writes.

The test drains the worker between ``edit`` and ``delete``, so that a page's task cannot
run after an object it links to was deleted (see below); ``race`` is where a task running
while its object is deleted is exercised, on purpose.

What is deleted at the end (the last page, author, image and document) is referenced by
no other object's latest revision: Wagtail indexes a page's references from its latest
revision, so a page re-indexed after an object it links to was deleted lists that link
again, on any backend that runs tasks after the request (ImmediateBackend removed it for
good only because the page's task had run before the delete).
"""

import io
import time
from pathlib import Path

from django.core.files.base import ContentFile
from django.core.files.images import ImageFile
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from PIL import Image as PILImage
from wagtail.documents import get_document_model
from wagtail.images import get_image_model
from wagtail.models import Page

from home.models import ArticlePage, Author

PAGES = 6
EDITS = 3


def png(seed: int) -> ImageFile:
    buffer = io.BytesIO()
    PILImage.new("RGB", (64 + seed, 48), (seed * 40 % 256, 90, 160)).save(buffer, "PNG")
    return ImageFile(buffer, name=f"picture-{seed}.png")


class Command(BaseCommand):
    help = "Run round N of the editor's scenario."

    def add_arguments(self, parser):
        parser.add_argument("round", type=int)
        parser.add_argument("phase", choices=["edit", "delete", "race"])
        parser.add_argument("--gate", type=Path, help="the race gate's marker directory")

    def handle(self, *args, round, phase, gate=None, **options):
        if phase == "race":
            race(round, gate)
        elif phase == "delete":
            delete(round)
        else:
            edit(round)
        self.stdout.write(f"round {round} {phase} done")


RACE_DEADLINE = 120.0


def race(r: int, gate: Path) -> None:
    """Delete an author while the worker's index tasks for it are between read and write."""
    image = get_image_model().objects.get(title__startswith=f"r{r} image 0")
    # Its tasks are enqueued with it, in one transaction: no task can start (and park, on
    # SQLite holding the write lock) before the request has written all it writes first.
    with transaction.atomic():
        author = Author.objects.create(name=f"race r{r}", photo=image)
    reached = gate / f"{author.pk}.reached"
    deadline = time.monotonic() + RACE_DEADLINE
    while not reached.exists():
        if time.monotonic() > deadline:
            raise CommandError(f"no task read author {author.pk} within {RACE_DEADLINE} s")
        time.sleep(0.02)  # polling for the worker's task, with a deadline
    (gate / f"{author.pk}.deleting").touch()
    Author.objects.get(pk=author.pk).delete()


def delete(r: int) -> None:
    """The last page, author, image and document of round ``r``."""
    Image, Document = get_image_model(), get_document_model()
    ArticlePage.objects.get(slug=f"r{r}-article-{PAGES - 1}").delete()
    Author.objects.get(name__startswith=f"r{r} author 2").delete()
    Image.objects.get(title=f"r{r} image 2").delete()
    Document.objects.get(title=f"r{r} document 1").delete()


def edit(r: int) -> None:
    """Create, publish and edit round ``r``'s objects."""
    Image, Document = get_image_model(), get_document_model()
    home = Page.objects.get(depth=2)
    authors = [Author.objects.create(name=f"r{r} author {i}") for i in range(3)]
    images = [Image.objects.create(title=f"r{r} image {i}", file=png(r * 3 + i)) for i in range(3)]
    documents = [
        Document.objects.create(
            title=f"r{r} document {i}", file=ContentFile(b"notes %d" % i, name=f"r{r}-{i}.txt")
        )
        for i in range(2)
    ]
    authors[0].photo = images[0]
    authors[0].save()
    pages = []
    for i in range(PAGES):
        page = ArticlePage(
            title=f"r{r} article {i}",
            slug=f"r{r}-article-{i}",
            body=f"<p>article {i}</p>",
            image=images[i % 2],
            document=documents[0],
            author=authors[i % 2],
        )
        home.add_child(instance=page)
        page.save_revision().publish()
        pages.append(page)
    for k in range(EDITS):
        for i, page in enumerate(pages):
            page = ArticlePage.objects.get(pk=page.pk)
            page.title = f"r{r} article {i} v{k}"
            linked = pages[max(i - 1, 0)].pk
            page.body = f'<p>v{k}: see <a linktype="page" id="{linked}">article</a></p>'
            page.image = images[(i + k) % 2]
            page.save_revision().publish()
        for author in authors:
            author.name = f"{author.name}!"
            author.save()
        image = Image.objects.get(pk=images[0].pk)
        image.title = f"r{r} image 0 v{k}"
        image.focal_point_x, image.focal_point_y = 10 + k, 12 + k
        image.focal_point_width, image.focal_point_height = 20, 20
        image.save()
    # A draft edit that stays unpublished, and an unpublished page.
    draft = ArticlePage.objects.get(pk=pages[0].pk)
    draft.title = f"r{r} article 0 draft"
    draft.save_revision()
    ArticlePage.objects.get(pk=pages[1].pk).unpublish()
