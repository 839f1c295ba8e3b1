"""Ollama's native HTTP API (https://github.com/ollama/ollama/blob/main/docs/api.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from indexing.errors import LLMBackendError, LLMBadResponse
from indexing.llm.base import (
    ChatDelta,
    ChatResult,
    LLMBackend,
    ModelInfo,
    ProgressCallback,
    PullProgress,
    check_vectors,
    parse_logprobs,
)


class OllamaBackend(LLMBackend):
    kind = "ollama"

    def __init__(self, base_url: str, *, keep_alive: str | None = None, **kwargs):
        super().__init__(base_url, **kwargs)
        self.keep_alive = keep_alive

    def _with_keep_alive(self, body: dict) -> dict:
        if self.keep_alive is not None:
            body["keep_alive"] = self.keep_alive
        return body

    # -- embeddings ------------------------------------------------------------------

    def embed(self, texts: list[str], *, model: str) -> list[list[float]]:
        if not texts:
            return []
        body = self._with_keep_alive({"model": model, "input": list(texts), "truncate": True})
        answer = self._request("POST", "/api/embed", json_body=body, model=model)
        return check_vectors(answer.get("embeddings"), len(texts), model=model)

    def _discover_dims(self, model: str) -> int:
        # /api/show answers without loading the model; fall back to a probe embedding
        # when its model_info has no `<architecture>.embedding_length`.
        info = self.show(model)
        for key, value in (info.get("model_info") or {}).items():
            if key.endswith(".embedding_length") and isinstance(value, int) and value > 0:
                return value
        return super()._discover_dims(model)

    # -- models ------------------------------------------------------------------------

    def show(self, model: str) -> dict:
        return self._request("POST", "/api/show", json_body={"model": model}, model=model)

    def list_models(self) -> list[ModelInfo]:
        answer = self._request("GET", "/api/tags")
        models = []
        for entry in answer.get("models") or []:
            details = entry.get("details") or {}
            models.append(
                ModelInfo(
                    name=entry.get("name") or entry.get("model") or "",
                    size=int(entry.get("size") or 0),
                    family=details.get("family") or "",
                    parameter_size=details.get("parameter_size") or "",
                    quantization=details.get("quantization_level") or "",
                    modified_at=entry.get("modified_at") or "",
                )
            )
        return models

    def pull(self, model: str, *, progress: ProgressCallback | None = None) -> None:
        """Download a model, reporting each progress line Ollama streams."""
        last_status = ""
        for line in self._stream_lines("/api/pull", json_body={"model": model, "stream": True}, model=model):
            if line.get("error"):
                message = str(line["error"])
                if "not found" in message.lower() or "does not exist" in message.lower():
                    raise LLMBackendError(
                        f"Ollama cannot pull {model}: {message} (check the model name on ollama.com/library)"
                    )
                raise LLMBackendError(f"Ollama failed to pull {model}: {message}")
            last_status = str(line.get("status") or "")
            if progress is not None:
                progress(
                    PullProgress(
                        status=last_status,
                        completed=int(line.get("completed") or 0),
                        total=int(line.get("total") or 0),
                        digest=str(line.get("digest") or ""),
                    )
                )
        if last_status != "success":
            raise LLMBackendError(
                f"Ollama stopped pulling {model} before it finished (last status: {last_status or 'none'})"
            )

    # -- generation -------------------------------------------------------------------

    def generate(
        self,
        prompt: str,
        *,
        model: str,
        system: str | None = None,
        format: dict | str | None = None,
        options: dict | None = None,
        think: bool | None = None,
    ) -> str:
        body: dict[str, Any] = {"model": model, "prompt": prompt, "stream": False}
        if system:
            body["system"] = system
        _add_generation_options(body, format=format, options=options, think=think)
        answer = self._request("POST", "/api/generate", json_body=self._with_keep_alive(body), model=model)
        if "response" not in answer:
            raise LLMBadResponse(f"Ollama /api/generate answered without a response: {str(answer)[:200]}")
        return str(answer["response"])

    def chat(
        self,
        messages: list[dict],
        *,
        model: str,
        format: dict | str | None = None,
        logprobs: bool = False,
        top_logprobs: int = 0,
        options: dict | None = None,
        think: bool | None = None,
    ) -> ChatResult:
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": False}
        _add_generation_options(body, format=format, options=options, think=think)
        if logprobs:
            body["logprobs"] = True
            if top_logprobs:
                body["top_logprobs"] = top_logprobs
        answer = self._request("POST", "/api/chat", json_body=self._with_keep_alive(body), model=model)
        message = answer.get("message")
        if not isinstance(message, dict):
            raise LLMBadResponse(f"Ollama /api/chat answered without a message: {str(answer)[:200]}")
        return ChatResult(
            content=str(message.get("content") or ""),
            logprobs=parse_logprobs(answer.get("logprobs")),
            model=str(answer.get("model") or model),
            raw=answer,
        )

    def chat_stream(
        self, messages: list[dict], *, model: str, options: dict | None = None, think: bool | None = None
    ) -> Iterator[ChatDelta]:
        body: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
        _add_generation_options(body, format=None, options=options, think=think)
        for line in self._stream_lines(
            "/api/chat", json_body=self._with_keep_alive(body), model=model, read_timeout=self.timeout
        ):
            if line.get("error"):
                raise LLMBadResponse(f"Ollama stopped answering: {line['error']}")
            content = str((line.get("message") or {}).get("content") or "")
            if line.get("done"):
                if content:
                    yield ChatDelta(content=content)
                yield ChatDelta(
                    done=True,
                    tokens_in=int(line.get("prompt_eval_count") or 0),
                    tokens_out=int(line.get("eval_count") or 0),
                    model=str(line.get("model") or model),
                )
                return
            if content:
                yield ChatDelta(content=content)

    def version(self) -> str:
        try:
            return str(self._request("GET", "/api/version").get("version") or "")
        except LLMBadResponse:
            return ""


def _add_generation_options(body: dict[str, Any], *, format, options, think) -> None:
    """The optional fields /api/generate and /api/chat share."""
    if format is not None:
        body["format"] = format
    if options:
        body["options"] = options
    if think is not None:
        body["think"] = think
