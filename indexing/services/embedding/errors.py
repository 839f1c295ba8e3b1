"""Why embedding cannot go on."""

from __future__ import annotations

from indexing.llm import BackendError


class EmbeddingError(BackendError):
    """Embedding cannot go on; the message says what to do."""

    code = "embedding_failed"


class EmbeddingInProgress(EmbeddingError):
    """Another process is embedding for the same fingerprint right now."""

    code = "embedding_in_progress"
    http_status = 409
    summary = ""
