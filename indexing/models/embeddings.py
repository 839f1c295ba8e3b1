"""Embeddings: the vectors of content's chunks, per embedding setup.

Vectors are only comparable when they come from the same model, with the same
chunking and document prompt: an EmbeddingFingerprint records one such setup.
Chunks hang off Content (one set per content hash, shared by identical files),
per fingerprint. The vector column is untyped (`vector`, any dimension) so
that switching models needs no schema change; each fingerprint gets its own
partial HNSW index on `(embedding::vector(dims))` (see indexing/services/embedding/).
"""

from __future__ import annotations

from django.db import models
from pgvector.django import VectorField

from indexing.models.documents import Content


class EmbeddingFingerprint(models.Model):
    key = models.CharField(max_length=32, unique=True, help_text="hash of model, dims, chunking and document prompt")
    model = models.CharField(max_length=300)
    dims = models.PositiveIntegerField()
    backend = models.CharField(max_length=20, default="ollama")
    chunk_params = models.JSONField(default=dict)
    document_prompt = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-last_used_at"]

    def __str__(self) -> str:
        return f"{self.model} ({self.dims}d, {self.chunk_params.get('max_tokens', '?')} tokens/chunk)"

    @property
    def hnsw_index_name(self) -> str:
        return f"indexing_chunk_hnsw_{self.pk}"


class Chunk(models.Model):
    fingerprint = models.ForeignKey(EmbeddingFingerprint, on_delete=models.CASCADE, related_name="chunks")
    content = models.ForeignKey(Content, on_delete=models.CASCADE, related_name="chunks", db_column="content_hash")
    seq = models.PositiveIntegerField()
    char_start = models.PositiveIntegerField()
    char_end = models.PositiveIntegerField()
    start_line = models.PositiveIntegerField(default=1)
    tokens = models.PositiveIntegerField(default=0)
    embedding = VectorField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["fingerprint", "content", "seq"], name="chunk_unique_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.content_id[:12]}#{self.seq}"


class ContentEmbedding(models.Model):
    """A content whose chunks are all embedded under a fingerprint (written last)."""

    fingerprint = models.ForeignKey(EmbeddingFingerprint, on_delete=models.CASCADE, related_name="contents")
    content = models.ForeignKey(Content, on_delete=models.CASCADE, related_name="embeddings", db_column="content_hash")
    chunks = models.PositiveIntegerField(default=0)
    embedded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["fingerprint", "content"], name="content_embedding_unique"),
        ]
