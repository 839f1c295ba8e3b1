"""Whether the model server the index is configured for answers, and has its models.

Status used to count vectors only, so it showed embeddings green while nothing could embed,
and `pmd embed` queued work that waited in silence. Both now ask the backend actually in use
(the index's configuration, applied to settings when the process reached the database) once,
quickly and without retries, and say why it cannot embed and what to do.
"""

from __future__ import annotations

import os

import httpx
from django.conf import settings
from django.db import DatabaseError

from indexing.errors import LLMBackendError, LLMBackendUnavailable, LLMModelMissing
from indexing.llm import backend_url, make_backend
from indexing.llm.base import normalize_model_name

PROBE_SECONDS = 3.0  # a server that does not answer a model list in this time is as good as down
_OFF = {"", "none", "off", "false", "0", "no"}


def _configured() -> dict[str, str]:
    """The models each role uses (role -> name), the roles switched off left out."""
    roles = {
        "embed": settings.PMD_EMBED_MODEL,
        "generate": settings.PMD_GENERATE_MODEL,
        "rerank": settings.PMD_RERANK_MODEL,
    }
    return {role: str(name).strip() for role, name in roles.items() if str(name or "").strip().lower() not in _OFF}


def _what_to_do(kind: str) -> str:
    if kind == "ollama":
        return (
            "if it runs elsewhere, point the index at it: `pmd config set OLLAMA_URL=http://host:11434`; "
            "embedding resumes by itself once it answers"
        )
    if kind == "openai":
        return (
            "if it runs elsewhere, point the index at it: `pmd config set PMD_OPENAI_BASE_URL=…`; "
            "embedding resumes by itself once it answers"
        )
    return (
        "download the model where the model hub is reachable (`pmd models pull`), or copy its folder here and "
        "`pmd config set PMD_EMBED_MODEL=/path/to/folder`"
    )


def hub_problem(timeout: float) -> str | None:
    """Why the local backend cannot download a model now (None: the hub answers)."""
    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
        return "HF_HUB_OFFLINE is set"
    try:
        httpx.head(endpoint, timeout=timeout)
    except (OSError, httpx.HTTPError) as exc:
        return f"the model hub {endpoint} is not reachable ({type(exc).__name__})"
    return None


def _backend_from() -> str | None:
    """Where the backend in use comes from, in words (None when the index cannot be read)."""
    from indexing.services.index_config import SOURCE_WORDS, setting_source  # noqa: PLC0415 - loads the models

    try:
        return SOURCE_WORDS[setting_source("PMD_LLM_BACKEND")]
    except DatabaseError:
        return None


def model_server_status(*, timeout: float = PROBE_SECONDS) -> dict:
    """The backend in use, whether it answers (and why not), and which configured models it has.

    `ok` is false when nothing can be embedded: the server is down or lacks the embedding model.
    A missing expansion or re-rank model leaves `ok` alone and is said once in `hybrid`."""
    kind = settings.PMD_LLM_BACKEND
    url = backend_url()
    models = _configured()
    status: dict = {
        "ok": True,
        "backend": kind,
        "backend_from": _backend_from(),
        "url": url,
        "reachable": True,
        "models": {},
        "error": None,
        "advice": None,
        "hybrid": None,
    }
    try:
        backend = make_backend(kind, url=url, api_key=settings.PMD_OPENAI_API_KEY, timeout=timeout, retries=0)
        if kind == "local":
            present = {role: backend.has_model(name) for role, name in models.items() if role != "generate"}
            present["generate"] = False if "generate" in models else None  # the local backend does not generate
        else:
            names = {normalize_model_name(m.name) if kind == "ollama" else m.name for m in backend.list_models()}
            present = {
                role: (normalize_model_name(name) if kind == "ollama" else name) in names
                for role, name in models.items()
            }
            if settings.PMD_RERANK_URL and "rerank" in models:
                present["rerank"] = None  # served elsewhere: not this server's to have
    except LLMBackendError as exc:
        status.update(
            ok=False,
            reachable=False,
            error=str(exc),
            advice=_what_to_do(kind),
            models={role: {"model": name, "present": None} for role, name in models.items()},
        )
        return status
    status["models"] = {role: {"model": name, "present": present.get(role)} for role, name in models.items()}
    embed = status["models"].get("embed")
    if embed is None:
        status.update(
            ok=False,
            error="no embedding model is configured (PMD_EMBED_MODEL)",
            advice="`pmd config set PMD_EMBED_MODEL=…`",
        )
    elif embed["present"] is False:
        if kind == "local":
            hub = hub_problem(timeout)
            status.update(
                ok=hub is None,
                reachable=hub is None,
                error=f"model {embed['model']} is not downloaded yet"
                + (f" and cannot be: {hub}" if hub else " (it downloads at the first embedding)"),
                advice=_what_to_do(kind) if hub else None,
            )
        else:
            status.update(
                ok=False,
                error=str(LLMModelMissing(embed["model"], backend=kind)),
                advice="`pmd models pull`" if kind == "ollama" else "load the model in the server",
            )
    status["hybrid"] = hybrid_without(status["models"], semantic=status["ok"])
    return status


def hybrid_without(models: dict, *, absent: dict[str, str] | None = None, semantic: bool = True) -> str | None:
    """One sentence: which stages hybrid search runs without, and why (None: it has them all).
    `absent`: stage ("expansion", "rerank") -> why a query found its model missing; `semantic`:
    whether semantic search can run (the sentence says only what is not affected)."""
    absent = absent or {}
    missing = []
    for role, stage in (("generate", "expansion"), ("rerank", "rerank")):
        model = models.get(role)
        words = "query expansion" if stage == "expansion" else "re-ranking"
        if model is None:
            missing.append(f"without {words} (no model configured)")
        elif model["present"] is False:
            missing.append(f"without {words} ({model['model']} is not on the server)")
        elif stage in absent:
            missing.append(f"without {words} ({absent[stage]})")
    if not missing:
        return None
    spared = "keyword and semantic search are not affected" if semantic else "keyword search is not affected"
    return "hybrid search runs " + " and ".join(missing) + "; " + spared


def model_server_problem(*, timeout: float = PROBE_SECONDS) -> LLMBackendError | None:
    """Why nothing can be embedded now, as the error to raise (None: the backend can embed)."""
    status = model_server_status(timeout=timeout)
    if status["ok"]:
        return None
    if not status["reachable"] or status["backend"] == "local":
        message = status["error"] + (f"; {status['advice']}" if status["advice"] else "")
        return LLMBackendUnavailable(status["url"], backend=status["backend"], message=message)
    # A model the server lacks: the faces add how to get it (`pmd models pull`).
    return LLMModelMissing(
        status["models"].get("embed", {}).get("model", ""), backend=status["backend"], message=status["error"]
    )
