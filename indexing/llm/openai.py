"""Any OpenAI-compatible server: llama.cpp server, vLLM, LM Studio, TEI, LocalAI...

Base URL includes the `/v1` prefix (PMD_OPENAI_BASE_URL=http://host:8080/v1).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from indexing.errors import LLMBadResponse
from indexing.llm.base import ChatDelta, ChatResult, LLMBackend, ModelInfo, check_vectors, parse_logprobs

if TYPE_CHECKING:  # the HTTP client is imported where it is used (start-up cost)
    import httpx


class OpenAIBackend(LLMBackend):
    kind = "openai"

    def __init__(self, base_url: str, *, api_key: str = "", **kwargs):
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        super().__init__(base_url, headers=headers, **kwargs)

    def _raise_for_status(self, response: httpx.Response, model: str | None) -> None:
        if response.status_code in (401, 403):
            raise LLMBadResponse(
                f"the OpenAI-compatible server at {self.base_url} refused the request "
                f"({response.status_code}): check PMD_OPENAI_API_KEY"
            )
        super()._raise_for_status(response, model)

    def embed(self, texts: list[str], *, model: str) -> list[list[float]]:
        if not texts:
            return []
        answer = self._request("POST", "embeddings", json_body={"model": model, "input": list(texts)}, model=model)
        data = answer.get("data")
        if not isinstance(data, list):
            raise LLMBadResponse(f"/embeddings answered without data: {str(answer)[:200]}")
        # Servers may answer out of order; `index` says which input each vector is for.
        ordered = sorted(data, key=lambda item: item.get("index", 0)) if all("index" in d for d in data) else data
        vectors = check_vectors([item.get("embedding") for item in ordered], len(texts), model=model)
        return [_l2_normalize(v) for v in vectors]

    def list_models(self) -> list[ModelInfo]:
        answer = self._request("GET", "models")
        return [ModelInfo(name=str(item.get("id", ""))) for item in answer.get("data") or [] if isinstance(item, dict)]

    def has_model(self, model: str) -> bool:
        # OpenAI-compatible servers do not tag names (`:latest`): compare as given.
        return any(m.name == model for m in self.list_models())

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
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
        return self.chat(messages, model=model, format=format, options=options).content

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
        if format == "json":
            body["response_format"] = {"type": "json_object"}
        elif isinstance(format, dict):
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": format, "strict": True},
            }
        _add_options(body, options)
        if logprobs:
            body["logprobs"] = True
            if top_logprobs:
                body["top_logprobs"] = top_logprobs
        answer = self._request("POST", "chat/completions", json_body=body, model=model)
        choices = answer.get("choices")
        if not isinstance(choices, list) or not choices:
            raise LLMBadResponse(f"/chat/completions answered without choices: {str(answer)[:200]}")
        choice = choices[0]
        message = choice.get("message") or {}
        return ChatResult(
            content=str(message.get("content") or ""),
            logprobs=parse_logprobs((choice.get("logprobs") or {}).get("content")),
            model=str(answer.get("model") or model),
            raw=answer,
        )

    def chat_stream(
        self, messages: list[dict], *, model: str, options: dict | None = None, think: bool | None = None
    ) -> Iterator[ChatDelta]:
        body: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        _add_options(body, options)
        usage: dict = {}
        answered = model
        for event in self._stream_lines(
            "chat/completions", json_body=body, model=model, sse=True, read_timeout=self.timeout
        ):
            answered = str(event.get("model") or answered)
            usage = event.get("usage") or usage
            for choice in event.get("choices") or []:
                content = str((choice.get("delta") or {}).get("content") or "")
                if content:
                    yield ChatDelta(content=content)
        yield ChatDelta(
            done=True,
            tokens_in=int(usage.get("prompt_tokens") or 0),
            tokens_out=int(usage.get("completion_tokens") or 0),
            model=answered,
        )


def _add_options(body: dict, options: dict | None) -> None:
    """Ollama's option names, as the OpenAI API calls them."""
    for ollama_name, openai_name in (
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("seed", "seed"),
        ("num_predict", "max_tokens"),
    ):
        if options and ollama_name in options:
            body[openai_name] = options[ollama_name]


def _l2_normalize(vector: list[float]) -> list[float]:
    # Ollama normalises; OpenAI-compatible servers may not. Cosine search does not
    # care, but stored vectors that are unit length keep scores comparable.
    norm = sum(x * x for x in vector) ** 0.5
    return [x / norm for x in vector] if norm > 0 else vector
