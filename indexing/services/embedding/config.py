"""The embedding setup the settings ask for, and its fingerprint (model + dims + chunking + document prompt)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from django.conf import settings

from indexing.chunking import ChunkParams
from indexing.errors import EmbeddingError
from indexing.llm import EmbedPrompts, LLMBackend, chunk_tokens, embedding_prompts, get_backend
from indexing.models import EmbeddingFingerprint
from indexing.services.index_config import index_config_refresh


@dataclass(frozen=True)
class EmbeddingConfig:
    backend: str
    model: str
    chunk_params: ChunkParams
    prompts: EmbedPrompts
    batch_size: int

    def key(self, dims: int) -> str:
        described = json.dumps(
            {
                "model": self.model,
                "dims": dims,
                "chunking": self.chunk_params.describe(),
                "document_prompt": self.prompts.document,
            },
            sort_keys=True,
        )
        return hashlib.sha256(described.encode()).hexdigest()[:32]


def chunk_params_from_settings() -> ChunkParams:
    return ChunkParams(
        max_tokens=chunk_tokens(),
        overlap=settings.PMD_CHUNK_OVERLAP,
        window=settings.PMD_CHUNK_WINDOW,
    )


def embedding_config() -> EmbeddingConfig:
    """The embedding setup the settings ask for (no network), as the index is configured now:
    another process may have changed it (`pmd config set` while `pmd up` runs)."""
    index_config_refresh()
    try:
        params = chunk_params_from_settings()
    except ValueError as exc:
        raise EmbeddingError(f"chunking settings: {exc}") from None
    model = settings.PMD_EMBED_MODEL.strip()
    if settings.PMD_LLM_BACKEND == "ollama":
        model = model.removesuffix(":latest")  # the same Ollama model either way: one fingerprint
    return EmbeddingConfig(
        backend=settings.PMD_LLM_BACKEND,
        model=model,
        chunk_params=params,
        prompts=embedding_prompts(model),
        batch_size=settings.PMD_EMBED_BATCH,
    )


def fingerprint_ensure(
    *, config: EmbeddingConfig | None = None, backend: LLMBackend | None = None
) -> EmbeddingFingerprint:
    """The fingerprint for the configured setup, asking the backend for the dimension."""
    config = config or embedding_config()
    backend = backend or get_backend()
    dims = backend.embedding_dims(config.model)
    fingerprint, _ = EmbeddingFingerprint.objects.get_or_create(
        key=config.key(dims),
        defaults=dict(
            model=config.model,
            dims=dims,
            backend=config.backend,
            chunk_params=config.chunk_params.describe(),
            document_prompt=config.prompts.document,
        ),
    )
    return fingerprint


def fingerprint_configured(
    config: EmbeddingConfig | None = None, *, dims: int | None = None
) -> EmbeddingFingerprint | None:
    """The stored fingerprint matching the settings, without asking the backend."""
    config = config or embedding_config()
    if dims is not None:
        return EmbeddingFingerprint.objects.filter(key=config.key(dims)).first()
    return (
        EmbeddingFingerprint.objects.filter(
            model=config.model,
            chunk_params=config.chunk_params.describe(),
            document_prompt=config.prompts.document,
        )
        .order_by("-last_used_at")
        .first()
    )
