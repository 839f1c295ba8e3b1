"""History: the git commits of collections that are repositories.

A collection whose folder lies inside a git work tree has its current branch's history
indexed (indexing/services/history.py): one Commit per commit reachable from HEAD that touches
the folder. Each commit's searchable text is a Content row, so its chunks and vectors come
from the same embedding worker and backends as the notes' (pending.py asks for both).
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models

from indexing.models.collections import Collection
from indexing.models.documents import Content


class CollectionHistory(models.Model):
    """Where a collection's history indexing stands: the HEAD indexed, and why not when it is not."""

    class State(models.TextChoices):
        INDEXED = "indexed"
        NOT_REPOSITORY = "not_repository", "not in a git repository"
        EMPTY = "empty", "repository without commits"
        FAILED = "failed"

    collection = models.OneToOneField(Collection, on_delete=models.CASCADE, related_name="history")
    state = models.CharField(max_length=20, choices=State.choices, default=State.NOT_REPOSITORY)
    message = models.TextField(blank=True, default="")
    repository = models.CharField(max_length=4096, blank=True, default="", help_text="top of the git work tree")
    branch = models.CharField(max_length=500, blank=True, default="")
    head = models.CharField(max_length=64, blank=True, default="", help_text="the HEAD last indexed")
    shallow = models.BooleanField(default=False)
    capped = models.BooleanField(default=False, help_text="only the newest PMD_HISTORY_MAX_COMMITS are indexed")
    settings_key = models.CharField(
        max_length=64, blank=True, default="", help_text="the history settings the stored commits were made with"
    )
    commits = models.PositiveIntegerField(default=0)
    indexed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "collection histories"


class Commit(models.Model):
    """One commit of a collection's repository, as history search finds it."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="commits")
    sha = models.CharField(max_length=64)
    parents = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    title = models.CharField(max_length=1000, blank=True)
    message = models.TextField(blank=True, default="", help_text="the whole message, title included")
    author_name = models.CharField(max_length=500, blank=True, default="")
    author_email = models.CharField(max_length=500, blank=True, default="")
    committed_at = models.DateTimeField()
    # [{"status": "A|M|D|R|C|T", "path": ..., "old_path": ...}], paths relative to the collection
    changes = models.JSONField(default=list, blank=True)
    paths = ArrayField(
        models.TextField(),
        default=list,
        blank=True,
        help_text="every path the commit touched, old names of renames too (path filters)",
    )
    diff = models.TextField(blank=True, default="", help_text="the diff's first PMD_HISTORY_DIFF_LINES lines")
    diff_truncated = models.BooleanField(default=False)
    content = models.ForeignKey(Content, on_delete=models.PROTECT, related_name="commits", db_column="content_hash")
    tsv = SearchVectorField(null=True)  # everything, the diff included: what matches
    # Title, message, author and paths only: small enough to rank every match of a common word
    # (the full vector is read for the best few hundred only; retrieval/history.py).
    tsv_head = SearchVectorField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["collection", "sha"], name="commit_unique_sha")]
        indexes = [
            models.Index(fields=["collection", "committed_at"], name="commit_collection_date"),
            models.Index(fields=["content"], name="commit_content"),
            GinIndex(fields=["tsv"], name="commit_tsv_gin"),
        ]
        ordering = ["collection_id", "-committed_at"]

    def __str__(self) -> str:
        return f"{self.sha[:10]} {self.title}"
