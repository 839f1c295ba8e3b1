"""The index at work: long jobs and their progress, the files a scan could not index, the
settings every process using the index shares, and the LLM's cache."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from indexing.models.collections import Collection


class Job(models.Model):
    """Progress of long work (indexing, embedding) that the CLI, web UI and API follow."""

    class Kind(models.TextChoices):
        INDEX = "index"
        EMBED = "embed"
        UPDATE = "update"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    collection = models.ForeignKey(Collection, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True, default="")
    result = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Who started it from the web UI or API: members see only their own jobs. Jobs of the CLI,
    # the watcher and periodic tasks have none, so only staff see them.
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The process working on it (set when one takes it, kept fresh while it works): a job whose
    # process is gone (killed, out of memory) is recovered instead of staying `running`.
    worker_host = models.CharField(max_length=255, blank=True, default="")
    worker_pid = models.PositiveIntegerField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    @property
    def percent(self) -> int:
        if self.state == self.State.DONE:
            return 100
        return int(100 * self.done / self.total) if self.total else 0

    @property
    def finished(self) -> bool:
        return self.state in {self.State.DONE, self.State.FAILED}


class FileProblem(models.Model):
    """A file the last scan of its collection could not index cleanly."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="problems")
    path = models.CharField(max_length=4096)
    severity = models.CharField(max_length=10, choices=[("warning", "warning"), ("error", "error")])
    message = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["collection_id", "path"]


class IndexSetting(models.Model):
    """The index's own configuration (backend, URLs, models, chunking), one row a setting named
    like its environment variable: every process using the index reads it, so they agree
    whatever environment started them (indexing/services/index_config.py)."""

    name = models.CharField(max_length=64, primary_key=True)
    value = models.TextField(blank=True, default="")
    # Chosen by pmd (a default, or the local backend when no model server answered), not by a
    # person: the next `pmd up` whose environment names something else makes the choice again.
    automatic = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


class LLMCache(models.Model):
    key = models.CharField(max_length=64, primary_key=True)
    kind = models.CharField(max_length=32, default="", blank=True)
    value = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "LLM cache entry"
        verbose_name_plural = "LLM cache"
