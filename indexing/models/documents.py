"""What pmd knows about the files it indexes.

Content is addressed by the SHA-256 of its text, so identical files share one body
(and one set of chunks and embeddings). A Document is a path inside a Collection pointing
at the content it currently has; its links to other notes and the text converted from
PDFs, DOCX… are kept with it.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models

from indexing.convert import format_of
from indexing.models.collections import Collection


class Content(models.Model):
    hash = models.CharField(max_length=64, primary_key=True)
    body = models.TextField()
    size = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "content"

    def __str__(self) -> str:
        return self.hash[:12]


class Document(models.Model):
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="documents")
    path = models.CharField(max_length=4096, help_text="Relative to the collection root, with '/' separators.")
    title = models.CharField(max_length=1000, blank=True)
    content = models.ForeignKey(Content, on_delete=models.PROTECT, related_name="documents", db_column="content_hash")
    docid = models.CharField(max_length=6, db_index=True, help_text="First 6 hex digits of the content hash.")
    active = models.BooleanField(default=True)
    mtime = models.FloatField(default=0)
    size = models.PositiveBigIntegerField(default=0)
    frontmatter = models.JSONField(default=dict, blank=True)
    # The note's own structure (indexing.structure), kept for filters, facets and sorting:
    # tags from frontmatter and inline #tags (lower case, no '#'), and the note's date with where
    # it came from ("frontmatter:date", "frontmatter:created", "filename" or "mtime").
    tags = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    # What `tag:` filters match: every tag and each parent of a nested one (`project/x` also as
    # `project`, the way Obsidian nests tags), computed by PostgreSQL (migration 0007) so every
    # writer of `tags` keeps it right; facets and the document view show `tags` as written.
    tags_with_parents = models.GeneratedField(
        expression=models.Func(
            models.F("tags"),
            function="pmd_tags_with_parents",
            output_field=ArrayField(models.CharField(max_length=200)),
        ),
        output_field=ArrayField(models.CharField(max_length=200)),
        db_persist=True,
    )
    note_date = models.DateTimeField(null=True, blank=True)
    date_source = models.CharField(max_length=40, blank=True, default="")
    # The converted text (Extraction) a PDF, DOCX… was read from; "" for markdown. An extraction no
    # active document names any more is deleted (extractions_prune).
    extraction_key = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["collection", "path"], name="document_unique_path"),
        ]
        indexes = [
            models.Index(fields=["collection", "active"]),
            GinIndex(fields=["tags"], name="document_tags_gin"),
            GinIndex(fields=["tags_with_parents"], name="document_tag_parents_gin"),
            GinIndex(fields=["frontmatter"], name="document_frontmatter_gin", opclasses=["jsonb_path_ops"]),
            models.Index(fields=["note_date"], name="document_note_date"),
            # path:folder/** filters: `path LIKE 'folder/%'` through it, whatever the collation
            models.Index(fields=["path"], name="document_path_prefix", opclasses=["varchar_pattern_ops"]),
            models.Index(
                fields=["extraction_key"], name="document_extraction_key", condition=~models.Q(extraction_key="")
            ),
        ]
        ordering = ["collection_id", "path"]

    def __str__(self) -> str:
        return self.uri

    @property
    def uri(self) -> str:
        return f"pmd://{self.collection.name}/{self.path}"

    @property
    def file_type(self) -> str:
        """markdown, pdf, docx, pptx, xlsx, html, epub or text: what the path's extension is read as."""
        return format_of(self.path)


class DocumentLink(models.Model):
    """A link written in a note: `[[Note]]`, `[[Note|text]]`, `[[Note#Heading]]`, `![[embed]]` or a
    markdown link to a .md file. `target` is the note it resolves to inside the same collection
    (by path, file name, title or alias), NULL while nothing matches (a problem of the source)."""

    class Kind(models.TextChoices):
        WIKILINK = "wikilink"
        EMBED = "embed"
        MARKDOWN = "markdown"

    source = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="links_out")
    target = models.ForeignKey(Document, null=True, blank=True, on_delete=models.SET_NULL, related_name="links_in")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    target_text = models.CharField(max_length=1000, help_text="what the link names, as written")
    heading = models.CharField(max_length=500, blank=True, default="")
    shown_text = models.CharField(max_length=500, blank=True, default="")
    line = models.PositiveIntegerField(default=1)
    context = models.TextField(blank=True, default="", help_text="the sentence around the link")

    class Meta:
        indexes = [models.Index(fields=["target"]), models.Index(fields=["source"])]
        ordering = ["source_id", "line", "id"]

    def __str__(self) -> str:
        return f"{self.source_id} → {self.target_text}"


class Extraction(models.Model):
    """The text a converter made of a file's bytes (indexing/convert), by their SHA-256, the format
    and the converter's version: a file touched but unchanged, renamed or copied into another
    collection is never converted twice. A file the converter refused keeps its reason here, so a
    file that hangs the converter costs its time limit once, not at every scan."""

    key = models.CharField(max_length=100, primary_key=True)  # sha256:format:version
    text = models.TextField(blank=True)
    units = models.PositiveIntegerField(default=0)  # pages, slides, sheets or chapters read
    warnings = models.JSONField(default=list, blank=True)
    refused = models.TextField(blank=True)  # why it could not be read; "" when it was
    seconds = models.FloatField(default=0)  # how long the conversion took
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.key
