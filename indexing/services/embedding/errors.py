"""Why embedding cannot go on."""

from __future__ import annotations

from indexing.llm import BackendError


class EmbeddingError(BackendError):
    """Embedding cannot go on; the message says what to do."""

    code = "embedding_failed"
