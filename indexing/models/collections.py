"""Collections: the folders pmd indexes, who sees them, and the contexts that describe their parts."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Collection(models.Model):
    class Visibility(models.TextChoices):
        """Who may see a collection (indexing.access decides it, in every query)."""

        EVERYONE = "everyone", "everyone signed in"
        SHARED = "shared", "chosen groups and people"
        PRIVATE = "private", "only its owner"

    class TitleFrom(models.TextChoices):
        """Where a note's title comes from (indexing.text.extract_title)."""

        HEADING = "heading", "frontmatter title, else the first level-1 heading, else the file name"
        FILENAME = "filename", "the file name (Obsidian's convention)"

    name = models.CharField(max_length=200, unique=True)
    root_path = models.CharField(max_length=4096)
    mask = models.CharField(max_length=500, default="**/*.md")
    ignore_patterns = models.JSONField(default=list, blank=True)
    text_search_config = models.CharField(
        max_length=63,
        default="english",
        help_text="PostgreSQL text search configuration for stemming and stop words (english, simple, ...).",
    )
    title_from = models.CharField(
        max_length=10,
        choices=TitleFrom.choices,
        default=TitleFrom.HEADING,
        help_text="where notes' titles come from; 'filename' is chosen for a folder holding .obsidian/",
    )
    transclude = models.BooleanField(
        default=False,
        help_text="a note that embeds another (![[Note#Section]]) is found by the embedded words too",
    )
    # How the stored titles, tags and links were read (indexing.text.note_reading): when it is not
    # how this pmd reads them, the next scan reads every note again, changed or not.
    reading = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    last_indexed_at = models.DateTimeField(null=True, blank=True)
    visibility = models.CharField(max_length=10, choices=Visibility.choices, default=Visibility.EVERYONE)
    # Who added it from the web UI, API or admin (none from the CLI): the owner always sees it.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="owned_collections"
    )
    shared_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="shared_collections",
        help_text="people who see it when shared with chosen groups and people",
    )
    shared_groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="shared_collections",
        help_text="groups whose members see it when shared with chosen groups",
    )
    # Agents and people write notes only into a collection someone made writable, and then only
    # its owner, superusers and the people and groups chosen here (who must also see it).
    writable = models.BooleanField(
        default=False, help_text="notes may be written, edited, moved and deleted through pmd"
    )
    writer_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="writable_collections",
        help_text="people who may write notes in it (when it is writable and they see it)",
    )
    writer_groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="writable_collections",
        help_text="groups whose members may write notes in it (when it is writable and they see it)",
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def uri(self) -> str:
        return f"pmd://{self.name}/"


class PathContext(models.Model):
    """Text describing a part of the knowledge base, inherited by everything below it.

    collection NULL with prefix "" is the global context (`/`); a collection with
    prefix "" is that collection's root context; otherwise a path prefix inside it.
    """

    collection = models.ForeignKey(Collection, null=True, blank=True, on_delete=models.CASCADE, related_name="contexts")
    path_prefix = models.CharField(max_length=4096, blank=True, default="")
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "path_prefix"],
                name="context_unique_prefix",
                nulls_distinct=False,
            ),
        ]
        ordering = ["collection_id", "path_prefix"]

    def __str__(self) -> str:
        return self.target

    @property
    def target(self) -> str:
        if self.collection_id is None:
            return "/"
        return f"pmd://{self.collection.name}/{self.path_prefix}"
