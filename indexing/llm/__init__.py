"""The LLM backend: one client for embeddings, generation and chat, chosen by settings.

    from indexing.llm import get_backend, embedding_prompts
    vectors = get_backend().embed(texts, model=settings.PMD_EMBED_MODEL)

PMD_LLM_BACKEND=ollama (default; OLLAMA_URL), openai (PMD_OPENAI_BASE_URL,
PMD_OPENAI_API_KEY) or local (models run in this process, indexing.llm.local). A re-ranker
served elsewhere (PMD_RERANK_URL) gets its own client: `rerank_backend`. Errors are
`LLMBackendError` subclasses whose message tells the user what to do.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from django.conf import settings

from indexing.errors import LLMBackendError
from indexing.llm.base import ChatResult, LLMBackend, ModelInfo, PullProgress, TokenLogprob
from indexing.llm.ollama import OllamaBackend
from indexing.llm.openai import OpenAIBackend
from indexing.llm.prompts import EmbedPrompts, prompts_for

__all__ = [
    "ChatResult",
    "EmbedPrompts",
    "rerank_backend",
    "LLMBackend",
    "ModelInfo",
    "PullProgress",
    "TokenLogprob",
    "backend_url",
    "embedding_prompts",
    "get_backend",
    "make_backend",
]

_lock = threading.Lock()
# Clients are cached by everything that shapes one: a client holds a connection pool, so a process
# reuses it, and a change of settings (tests, a different timeout) gets its own. The pid is part of
# the key because a forked celery worker must not share its parent's connections.
_cached: dict[tuple, LLMBackend] = {}


def make_backend(
    kind: str,
    *,
    url: str,
    api_key: str = "",
    timeout: float = 120.0,
    retries: int = 3,
    keep_alive: str | None = None,
    backoff: float = 0.5,
) -> LLMBackend:
    if kind == "ollama":
        return OllamaBackend(url, timeout=timeout, retries=retries, keep_alive=keep_alive, backoff=backoff)
    if kind == "openai":
        return OpenAIBackend(url, api_key=api_key, timeout=timeout, retries=retries, backoff=backoff)
    if kind == "local":
        # Here: the local backend loads httpx (indexing.llm.base keeps it out of a keyword search's start-up).
        from indexing.llm import shared  # noqa: PLC0415 - start-up time (see above)
        from indexing.llm.local import LocalBackend  # noqa: PLC0415 - start-up time; numpy/onnxruntime load with a model

        socket_path = str(getattr(settings, "PMD_MODEL_SOCKET", "") or "")
        if socket_path and not shared.serving_here():  # under `pmd up`: one process holds the models
            return shared.SharedModelsClient(
                Path(url), socket_path, threads=int(settings.PMD_LOCAL_THREADS), timeout=timeout
            )
        return LocalBackend(
            Path(url),
            threads=int(settings.PMD_LOCAL_THREADS),
            batch=int(getattr(settings, "PMD_LOCAL_BATCH", 0) or 0),
            precision=getattr(settings, "PMD_LOCAL_PRECISION", "fp32"),
        )
    raise LLMBackendError(f"PMD_LLM_BACKEND={kind!r} is not a backend pmd knows: use `ollama`, `openai` or `local`")


def backend_url() -> str:
    if settings.PMD_LLM_BACKEND == "local":
        return str(models_dir())
    return settings.PMD_OPENAI_BASE_URL if settings.PMD_LLM_BACKEND == "openai" else settings.OLLAMA_URL


def models_dir() -> Path:
    """Where the local backend keeps downloaded models."""
    return Path(settings.PMD_HOME) / "models"


def rerank_backend(*, timeout: float | None = None, retries: int | None = None) -> LLMBackend:
    """The client re-ranking goes through: PMD_RERANK_URL's server when set (a llama.cpp,
    vLLM, Infinity or TEI re-ranker next to Ollama), else the configured backend."""
    url = str(getattr(settings, "PMD_RERANK_URL", "") or "").rstrip("/")
    if not url:
        return get_backend(timeout=timeout, retries=retries)
    key = (
        os.getpid(),
        "rerank",
        url,
        settings.PMD_OPENAI_API_KEY,
        float(settings.PMD_LLM_TIMEOUT if timeout is None else timeout),
        int(settings.PMD_LLM_RETRIES if retries is None else retries),
        float(settings.PMD_LLM_RETRY_BACKOFF),
    )
    with _lock:
        backend = _cached.get(key)
        if backend is None:
            backend = OpenAIBackend(url, api_key=key[3], timeout=key[4], retries=key[5], backoff=key[6])
            _cached[key] = backend
        return backend


def get_backend(*, timeout: float | None = None, retries: int | None = None) -> LLMBackend:
    """The configured backend: the one client factory. `timeout` defaults to PMD_LLM_TIMEOUT and
    `retries` to PMD_LLM_RETRIES; `retries=0` gives a client that asks once (checking whether the
    server is back), and the query pipeline asks for a short timeout that fits its deadline."""
    kind = settings.PMD_LLM_BACKEND
    key = (
        os.getpid(),
        kind,
        backend_url(),
        settings.PMD_OPENAI_API_KEY if kind == "openai" else "",
        float(settings.PMD_LLM_TIMEOUT if timeout is None else timeout),
        int(settings.PMD_LLM_RETRIES if retries is None else retries),
        settings.PMD_OLLAMA_KEEP_ALIVE or None,
        float(settings.PMD_LLM_RETRY_BACKOFF),
        int(settings.PMD_LOCAL_THREADS) if kind == "local" else 0,
        str(getattr(settings, "PMD_MODEL_SOCKET", "") or "") if kind == "local" else "",
        int(getattr(settings, "PMD_LOCAL_BATCH", 0) or 0) if kind == "local" else 0,
        str(getattr(settings, "PMD_LOCAL_PRECISION", "fp32")) if kind == "local" else "",
    )
    with _lock:
        backend = _cached.get(key)
        if backend is None:
            backend = make_backend(
                kind, url=key[2], api_key=key[3], timeout=key[4], retries=key[5], keep_alive=key[6], backoff=key[7]
            )
            _cached[key] = backend
        return backend


def embedding_prompts(model: str | None = None) -> EmbedPrompts:
    """Prompt templates for the embedding model (PMD_EMBED_MODEL unless given)."""
    configured = settings.PMD_EMBED_MODEL
    model = model or configured
    if model != configured:
        return prompts_for(model)
    return prompts_for(
        model, query_override=settings.PMD_EMBED_QUERY_PROMPT, document_override=settings.PMD_EMBED_DOC_PROMPT
    )


# Word pieces a chunk leaves free under the model's window: [CLS], [SEP] and the estimate's slack.
WINDOW_MARGIN = 6


def chunk_tokens() -> int:
    """PMD_CHUNK_TOKENS, or for the local backend when it is unset, the model's window
    (all-MiniLM-L6-v2: 256 word pieces → 250): a longer chunk would be cut by the model."""
    if settings.PMD_LLM_BACKEND == "local" and getattr(settings, "PMD_CHUNK_TOKENS_FROM_MODEL", False):
        # start-up time: the local backend's module (about 10 ms) loads for that backend only (`pmd status`)
        from indexing.llm.local import model_window  # noqa: PLC0415 - start-up time (see above)

        window = model_window(settings.PMD_EMBED_MODEL.strip(), models_dir())
        if window:
            return max(32, window - WINDOW_MARGIN)
    return settings.PMD_CHUNK_TOKENS
