"""A page that references an image, a document, an author snippet and other pages, and an
indexed snippet: what Wagtail's reference and search index tasks work on."""

from django.db import models
from wagtail.fields import RichTextField
from wagtail.models import Page
from wagtail.search import index
from wagtail.snippets.models import register_snippet


@register_snippet
class Author(index.Indexed, models.Model):
    name = models.CharField(max_length=200)
    photo = models.ForeignKey(
        "wagtailimages.Image", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    search_fields = [index.SearchField("name")]

    def __str__(self) -> str:
        return self.name


class ArticlePage(Page):
    body = RichTextField(blank=True)
    image = models.ForeignKey(
        "wagtailimages.Image", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    document = models.ForeignKey(
        "wagtaildocs.Document", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    author = models.ForeignKey(
        Author, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    search_fields = [*Page.search_fields, index.SearchField("body")]
