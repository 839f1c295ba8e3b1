"""What pmd needs from an LLM server, and the errors a user can act on.

Two implementations speak to real servers over HTTP: `ollama.OllamaBackend`
(Ollama's native API) and `openai.OpenAIBackend` (any OpenAI-compatible server:
llama.cpp, vLLM, LM Studio, TEI). Both share the retry loop below so that a
server that is restarting or briefly overloaded (connection refused, 5xx) does
not fail a long embedding run, while a missing model or a bad request fails at
once with a message that says what to do.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from indexing.errors import (
    LLMBackendError,
    LLMBackendTimeout,
    LLMBackendUnavailable,
    LLMBadResponse,
    LLMEndpointMissing,
    LLMModelMissing,
)

if TYPE_CHECKING:  # the HTTP client is imported where it is used (start-up cost)
    import httpx

logger = logging.getLogger(__name__)


# --- results -----------------------------------------------------------------------


@dataclass(frozen=True)
class ModelInfo:
    name: str
    size: int = 0
    family: str = ""
    parameter_size: str = ""
    quantization: str = ""
    modified_at: str = ""


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass
class ChatResult:
    content: str
    logprobs: list[TokenLogprob] = field(default_factory=list)
    model: str = ""
    raw: dict = field(default_factory=dict)

    def json(self) -> Any:
        """The content parsed as JSON (for `format=` structured replies)."""
        try:
            return json.loads(self.content)
        except json.JSONDecodeError as exc:
            raise LLMBadResponse(f"the model did not answer valid JSON: {self.content[:200]!r}") from exc


@dataclass(frozen=True)
class ChatDelta:
    """A piece of a streamed chat answer; the last one (`done`) carries the token counts."""

    content: str = ""
    done: bool = False
    tokens_in: int = 0
    tokens_out: int = 0
    model: str = ""


@dataclass(frozen=True)
class PullProgress:
    status: str
    completed: int = 0
    total: int = 0
    digest: str = ""


ProgressCallback = Callable[[PullProgress], None]


# --- the interface -------------------------------------------------------------------


class LLMBackend:
    """Base class: HTTP plumbing with retries, plus the operations pmd uses."""

    kind = "base"

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 120.0,
        connect_timeout: float = 5.0,
        retries: int = 3,
        backoff: float = 0.5,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ):
        import httpx  # noqa: PLC0415 - start-up time: a keyword search never loads the HTTP client

        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = max(0, retries)
        self.backoff = backoff
        self._client = httpx.Client(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            headers=headers or {},
            transport=transport,
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.base_url}>"

    def close(self) -> None:
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- operations (implemented by subclasses) --------------------------------

    def embed(self, texts: list[str], *, model: str) -> list[list[float]]:
        """One vector per input text, in order."""
        raise NotImplementedError

    def list_models(self) -> list[ModelInfo]:
        raise NotImplementedError

    def has_model(self, model: str) -> bool:
        wanted = normalize_model_name(model)
        return any(normalize_model_name(m.name) == wanted for m in self.list_models())

    def embedding_dims(self, model: str) -> int:
        """The length of the model's vectors. Not cached: a model can be re-pulled
        with another size while a worker runs, and the question is cheap."""
        return self._discover_dims(model)

    def _discover_dims(self, model: str) -> int:
        vectors = self.embed(["dimension probe"], model=model)
        if not vectors or not vectors[0]:
            raise LLMBadResponse(f"model {model} returned no embedding for a probe text: is it an embedding model?")
        return len(vectors[0])

    def pull(self, model: str, *, progress: ProgressCallback | None = None) -> None:
        raise LLMBackendError(f"the {self.kind} backend cannot pull models: load {model} in the server yourself")

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
        """A single completion; `format` is "json" or a JSON schema the answer must follow."""
        raise NotImplementedError

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
        """A chat turn; `logprobs` asks for per-token log probabilities (used by re-ranking)."""
        raise NotImplementedError

    def chat_stream(
        self, messages: list[dict], *, model: str, options: dict | None = None, think: bool | None = None
    ) -> Iterator[ChatDelta]:
        """A chat turn streamed as it is written. Closing the iterator closes the connection,
        which stops the server generating (a reader who left costs no more tokens)."""
        result = self.chat(messages, model=model, options=options, think=think)
        yield ChatDelta(content=result.content)
        yield ChatDelta(done=True, model=result.model)

    def rerank(self, query: str, documents: list[str], *, model: str, api: str) -> list[float]:
        """Scores of each document for the query (0..1, in order) from a rerank endpoint in one request.

        `api` "rerank": POST {base}/v1/rerank (llama.cpp, vLLM, Infinity, Jina, Cohere):
        {model, query, documents, top_n} → {results: [{index, relevance_score}]}.
        `api` "tei": POST {root}/rerank (Hugging Face TEI): {query, texts} → [{index, score}].
        """
        if not documents:
            return []
        if api == "tei":
            url = self.base_url.removesuffix("/v1") + "/rerank"
            body: dict = {"query": query, "texts": list(documents), "truncate": True}
            if model:
                body["model"] = model
        else:
            url = self.base_url + ("/rerank" if self.base_url.endswith("/v1") else "/v1/rerank")
            body = {"model": model, "query": query, "documents": list(documents), "top_n": len(documents)}
        answer = self._request("POST", url, json_body=body, model=model)
        return rerank_scores(answer, len(documents), url=url)

    # -- HTTP plumbing -----------------------------------------------------------

    def _unavailable(self, detail: str = "") -> LLMBackendUnavailable:
        return LLMBackendUnavailable(self.base_url, backend=self.kind, detail=detail)

    def _raise_for_status(self, response: httpx.Response, model: str | None) -> None:
        """Turn an HTTP error answer into the right LLMBackendError (subclasses refine)."""
        if model and _is_model_missing(response):
            raise LLMModelMissing(model, backend=self.kind)
        if response.status_code in (404, 405):
            raise LLMEndpointMissing(
                f"{response.request.url} does not exist (404): is {self.base_url} really an "
                f"{'Ollama' if self.kind == 'ollama' else 'OpenAI-compatible'} server?"
            )
        raise LLMBadResponse(
            f"{self.kind} server error {response.status_code} on {response.request.url.path}: {_error_text(response)}"
        )

    def _request(self, method: str, path: str, *, json_body: Any = None, model: str | None = None) -> Any:
        """Send a request and return its JSON, retrying connection errors and 5xx."""
        import httpx  # noqa: PLC0415 - start-up time: a keyword search never loads the HTTP client

        attempt = 0
        while True:
            try:
                response = self._client.request(method, path, json=json_body)
            except httpx.TimeoutException as exc:
                if isinstance(exc, httpx.ConnectTimeout) and attempt < self.retries:
                    attempt = self._sleep_before_retry(attempt, f"connect timeout on {path}")
                    continue
                if isinstance(exc, httpx.ConnectTimeout):
                    raise self._unavailable("connect timeout") from None
                raise LLMBackendTimeout(self.base_url, self.timeout) from None
            except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
                if attempt < self.retries:
                    attempt = self._sleep_before_retry(attempt, f"{type(exc).__name__} on {path}")
                    continue
                raise self._unavailable() from None
            if response.status_code >= 500 and attempt < self.retries and not _is_model_missing(response):
                attempt = self._sleep_before_retry(attempt, f"HTTP {response.status_code} on {path}")
                continue
            if response.status_code >= 400:
                self._raise_for_status(response, model)
            try:
                return response.json()
            except ValueError:
                raise LLMBadResponse(
                    f"{self.kind} server answered {path} with something that is not JSON: {response.text[:200]!r}"
                ) from None

    def _stream_lines(
        self,
        path: str,
        *,
        json_body: Any,
        model: str | None = None,
        sse: bool = False,
        read_timeout: float | None = None,
    ) -> Iterator[dict]:
        """POST and yield each JSON line of a streamed answer: NDJSON, or server-sent events
        (`data: {...}` lines, ended by `data: [DONE]`) with `sse`. `read_timeout`: the longest
        wait for the next line (None: no limit, a model download's pauses)."""
        import httpx  # noqa: PLC0415 - start-up time: a keyword search never loads the HTTP client

        attempt = 0
        while True:
            try:
                timeout = httpx.Timeout(None, connect=5.0, read=read_timeout)
                with self._client.stream("POST", path, json=json_body, timeout=timeout) as response:
                    if response.status_code >= 500 and attempt < self.retries:
                        response.read()
                        attempt = self._sleep_before_retry(attempt, f"HTTP {response.status_code} on {path}")
                        continue
                    if response.status_code >= 400:
                        response.read()
                        self._raise_for_status(response, model)
                    for line in response.iter_lines():
                        if sse:
                            if not line.startswith("data:"):
                                continue
                            line = line[5:].strip()
                            if line == "[DONE]":
                                return
                        if line.strip():
                            try:
                                yield json.loads(line)
                            except ValueError:
                                raise LLMBadResponse(f"unreadable progress line from {path}: {line[:200]!r}") from None
                    return
            except (httpx.ConnectError, httpx.ConnectTimeout):
                if attempt < self.retries:
                    attempt = self._sleep_before_retry(attempt, f"cannot connect for {path}")
                    continue
                raise self._unavailable() from None
            except (httpx.RemoteProtocolError, httpx.ReadError):
                raise self._unavailable("connection dropped while streaming") from None
            except httpx.ReadTimeout:
                raise LLMBackendTimeout(self.base_url, read_timeout or 0) from None

    def _sleep_before_retry(self, attempt: int, why: str) -> int:
        delay = self.backoff * (2**attempt)
        # Debug only: a retry that works is no news, and one that does not ends in the error
        # that is reported (a worker logged three lines per queued task while Ollama was down).
        logger.debug("LLM backend %s: %s, retrying in %.2fs", self.base_url, why, delay)
        time.sleep(delay)
        return attempt + 1


# --- helpers -----------------------------------------------------------------------


def normalize_model_name(name: str) -> str:
    """`embeddinggemma` and `embeddinggemma:latest` are the same Ollama model."""
    name = name.strip()
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("message") or error)
        if error:
            return str(error)
    return response.text[:300]


def _is_model_missing(response: httpx.Response) -> bool:
    if response.status_code not in (400, 404, 500):
        return False
    text = _error_text(response).lower()
    return (
        (("not found" in text or "does not exist" in text) and "model" in text)
        or "try pulling" in text
        or "model_not_found" in text
    )


def parse_logprobs(entries: Any) -> list[TokenLogprob]:
    """Per-token log probabilities; Ollama and OpenAI use the same entry shape:
    [{token, logprob, top_logprobs: [{token, logprob}]}]."""
    parsed = []
    for entry in entries or []:
        if not isinstance(entry, dict) or "logprob" not in entry:
            continue
        top = tuple(
            (str(alt.get("token", "")), float(alt.get("logprob", 0.0)))
            for alt in entry.get("top_logprobs") or []
            if isinstance(alt, dict)
        )
        parsed.append(TokenLogprob(str(entry.get("token", "")), float(entry["logprob"]), top))
    return parsed


def rerank_scores(answer: Any, count: int, *, url: str) -> list[float]:
    """One 0..1 score per document from a rerank answer (either shape). Servers that send raw
    logits (outside 0..1) get a sigmoid, so the scores are confidences like the chat method's."""
    entries = answer.get("results", answer.get("data")) if isinstance(answer, dict) else answer
    if not isinstance(entries, list):
        raise LLMBadResponse(f"{url} answered without results: {str(answer)[:200]}")
    scores: dict[int, float] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("index"), int):
            continue
        value = entry.get("relevance_score", entry.get("score"))
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            scores[entry["index"]] = float(value)
    if set(scores) != set(range(count)):
        raise LLMBadResponse(f"{url} scored {len(scores)} of {count} documents: {str(answer)[:200]}")
    values = [scores[i] for i in range(count)]
    if any(v < 0.0 or v > 1.0 for v in values):
        values = [1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, v)))) for v in values]
    return values


def check_vectors(vectors: Any, count: int, *, model: str) -> list[list[float]]:
    """Validate an embedding answer: one non-empty vector per input, all the same length."""
    if not isinstance(vectors, list) or len(vectors) != count:
        got = len(vectors) if isinstance(vectors, list) else type(vectors).__name__
        raise LLMBadResponse(f"model {model} returned {got} embeddings for {count} inputs")
    lengths = {len(v) for v in vectors if isinstance(v, list)}
    if len(lengths) != 1 or 0 in lengths or any(not isinstance(v, list) for v in vectors):
        raise LLMBadResponse(f"model {model} returned embeddings of inconsistent dimensions {sorted(lengths)}")
    return vectors
