"""An Ollama-API-compatible HTTP server for the test suite (real HTTP on 127.0.0.1).

It answers the endpoints pmd's backends call, with deterministic embeddings that
carry lexical similarity (hashed word unigrams and bigrams, L2-normalised), so a
test can assert that "postgres vacuum tuning" ranks the document about
PostgreSQL vacuum above the one about baking bread. Chat and generate answers
come from replaceable handlers, so query expansion and re-ranking can be tested.

Fault modes (set on the instance, cleared by `reset()`):
  * down: `stop()` it, or use `unused_url()` (nothing listens there);
  * slow: `delay = seconds` before every answer;
  * 500: `fail_next(n, status=500)` fails the next n requests (retries are visible),
    `fail_always = 500` fails all of them;
  * wrong dimension: `add_model(name, dims=8, embed_dims=16)` (show says 8, vectors have 16);
  * model missing: any name not added with `add_model` answers 404 like Ollama.

Chat streams (`"stream": true`) answer in pieces of a few words, `stream_delay` seconds apart;
`stream_closed_early` counts streams whose reader hung up before the end (cancellation).
`answer_from_passages(how)` is a chat handler for the ask service: it answers from the numbered
passages it was given, citing them, inventing a passage number or citing nothing.

Also OpenAI-compatible routes under /v1 (`openai_url`): /v1/models,
/v1/embeddings, /v1/chat/completions.

Rerank endpoints, off until named in `rerank_apis`: "rerank" answers POST /v1/rerank
(llama.cpp, vLLM, Infinity, Jina, Cohere: query, documents, top_n → results with index and
relevance_score, best first) and "tei" answers POST /rerank (Hugging Face TEI: query, texts
→ [{index, score}]). Scores are lexical (the cosine of `embed_text` vectors, mapped to 0..1),
or raw logits with `rerank_raw = True`.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_WORD = re.compile(r"\w+")
# Words every text shares carry no meaning; leaving them out keeps similarity lexical.
_STOP = frozenset("a an and are as at be by for from in is it of on or that the this to was with".split())


def embed_text(text: str, dims: int) -> list[float]:
    """Deterministic embedding: signed feature hashing of word unigrams (weight 1) and
    bigrams (weight 0.5), L2-normalised. Texts sharing words have positive cosine."""
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOP]
    vector = [0.0] * dims
    features = [(w, 1.0) for w in words] + [(f"{a} {b}", 0.5) for a, b in zip(words, words[1:])]
    for feature, weight in features:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        number = int.from_bytes(digest, "little")
        vector[number % dims] += weight if (number >> 63) & 1 else -weight
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0:
        vector[0] = 1.0  # never a zero vector: cosine distance to it is undefined
        return vector
    return [x / norm for x in vector]


def unused_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens (the "Ollama is down" case)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@dataclass
class FakeModel:
    name: str
    dims: int = 768
    kind: str = "embedding"  # "embedding" or "completion"
    family: str = "gemma3"
    embed_dims: int | None = None  # vectors of another length than /api/show says
    show_dims: bool = True  # False: /api/show lacks embedding_length

    @property
    def vector_dims(self) -> int:
        return self.embed_dims or self.dims


ChatHandler = Callable[[dict], "dict | str"]


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: Any
    headers: dict = field(default_factory=dict)


class _QuietServer(ThreadingHTTPServer):
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client that went away (killed worker, timeout) is an expected event here.
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)


def _tagged(name: str) -> str:
    return name if ":" in name.rsplit("/", 1)[-1] else f"{name}:latest"


class OllamaTestServer:
    def __init__(self):
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.port: int | None = None
        self._connections: set[socket.socket] = set()
        self.reset()

    # -- state ------------------------------------------------------------------------

    def reset(self) -> None:
        """Back to the default: embeddinggemma (768) and qwen3:0.6b, no faults."""
        with getattr(self, "_lock", threading.Lock()):
            self.models: dict[str, FakeModel] = {}
            self.pullable: dict[str, FakeModel] = {}
            self.requests: list[RecordedRequest] = []
            self.delay = 0.0
            self.fail_always: int | None = None
            self._fail_next: list[int] = []
            self.api_key = ""
            self.chat_handler: ChatHandler | None = None
            self.generate_handler: Callable[[dict], "dict | str"] | None = None
            self.on_embed: Callable[[int, list[str]], None] | None = None
            self.embed_calls = 0
            self.embedded_inputs = 0
            self.rerank_apis: set[str] = set()
            self.rerank_raw = False
            self.stream_delay = 0.0
            self.stream_closed_early = 0
        self.add_model("embeddinggemma", dims=768)
        self.add_model("qwen3:0.6b", kind="completion", family="qwen3", dims=1024)

    def add_model(self, name: str, **kwargs) -> FakeModel:
        model = FakeModel(name=_tagged(name), **kwargs)
        self.models[model.name] = model
        return model

    def remove_model(self, name: str) -> None:
        self.models.pop(_tagged(name), None)

    def offer_for_pull(self, name: str, **kwargs) -> None:
        """`/api/pull` of this name succeeds and then the model exists."""
        self.pullable[_tagged(name)] = FakeModel(name=_tagged(name), **kwargs)

    def fail_next(self, count: int, status: int = 500) -> None:
        with self._lock:
            self._fail_next.extend([status] * count)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    def model(self, name: str) -> FakeModel | None:
        return self.models.get(_tagged(name)) if name else None

    # -- lifecycle --------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_url(self) -> str:
        return f"{self.url}/v1"

    def start(self, port: int = 0) -> "OllamaTestServer":
        self._httpd = _QuietServer(("127.0.0.1", port), _make_handler(self))
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="ollama-test-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and cut open keep-alive connections, as a dying server does."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        for sock in list(self._connections):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._connections.clear()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def restart(self) -> None:
        """Stop and start again on the same port (the "Ollama came back" case)."""
        port = self.port
        self.stop()
        self.start(port or 0)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- request handling (called from handler threads) ---------------------------------

    def _take_failure(self) -> int | None:
        with self._lock:
            if self._fail_next:
                return self._fail_next.pop(0)
        return self.fail_always

    def _embed(self, model: FakeModel, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.embed_calls += 1
            self.embedded_inputs += len(texts)
            call = self.embed_calls
        if self.on_embed is not None:
            self.on_embed(call, texts)
        return [embed_text(t, model.vector_dims) for t in texts]

    def _chat(self, body: dict) -> dict:
        handler = self.chat_handler
        answer = handler(body) if handler else "ok"
        if isinstance(answer, str):
            answer = {"message": {"role": "assistant", "content": answer}}
        answer.setdefault("model", body.get("model"))
        answer.setdefault("done", True)
        if body.get("logprobs") and "logprobs" not in answer:
            content = answer["message"]["content"]
            answer["logprobs"] = [
                {
                    "token": content,
                    "logprob": -0.05,
                    "top_logprobs": [{"token": content, "logprob": -0.05}, {"token": "no", "logprob": -3.0}],
                }
            ]
        return answer

    def rerank_score(self, query: str, document: str) -> float:
        cosine = sum(a * b for a, b in zip(embed_text(query, 256), embed_text(document, 256)))
        return 8.0 * cosine - 2.0 if self.rerank_raw else (1.0 + cosine) / 2.0

    def _generate(self, body: dict) -> dict:
        handler = self.generate_handler
        answer = handler(body) if handler else "ok"
        if isinstance(answer, str):
            answer = {"response": answer}
        answer.setdefault("model", body.get("model"))
        answer.setdefault("done", True)
        return answer


_PASSAGE = re.compile(r"^\[(\d+)\] [^\n]*\n(.+?)(?=\n\[\d+\] |\n\nQuestion:|\Z)", re.S | re.M)


def answer_from_passages(how: str = "cite") -> ChatHandler:
    """A chat handler answering from the passages in the last message: "cite" writes one sentence
    per passage (at most three) ending in its [n]; "invent" also cites a passage it was not given
    ([99]); "none" writes the sentences without any citation."""

    def handler(body: dict) -> str:
        text = str((body.get("messages") or [{}])[-1].get("content") or "")
        sentences = []
        for number, passage in _PASSAGE.findall(text)[:3]:
            words = " ".join(passage.split()[:12])
            sentences.append(f"{words} [{number}]." if how != "none" else f"{words}.")
        if how == "invent":
            sentences.append("The notes also say something they never said [99].")
        return " ".join(sentences) or "I cannot tell."

    return handler


def _pieces(text: str, size: int = 3) -> list[str]:
    words = re.findall(r"\S+\s*", text)
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)] or [""]


def _make_handler(server: OllamaTestServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "ollama-test"

        def log_message(self, *args):
            pass

        def setup(self):
            super().setup()
            server._connections.add(self.connection)

        def finish(self):
            try:
                super().finish()
            finally:
                server._connections.discard(self.connection)

        # -- plumbing ---------------------------------------------------------------

        def _send(self, status: int, payload: Any) -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str) -> None:
            self._send(status, {"error": message})

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if not raw:
                return {}
            try:
                return json.loads(raw)
            except ValueError:
                return None

        def _prelude(self, body: Any) -> bool:
            """Record, delay, inject failures; False when the request was answered."""
            server.requests.append(RecordedRequest(self.command, self.path, body, dict(self.headers)))
            if server.delay:
                time.sleep(server.delay)
            status = server._take_failure()
            if status:
                self._error(status, "injected failure")
                return False
            if body is None:
                self._error(400, "invalid JSON body")
                return False
            return True

        def _missing(self, name: str) -> None:
            self._error(404, f'model "{name}" not found, try pulling it first')

        # -- routes -----------------------------------------------------------------

        def do_GET(self):
            if not self._prelude({}):
                return
            if self.path in ("/", ""):
                return self._send(200, b"Ollama is running")
            if self.path == "/api/version":
                return self._send(200, {"version": "0.12.0-test"})
            if self.path == "/api/tags":
                return self._send(
                    200,
                    {
                        "models": [
                            {
                                "name": m.name,
                                "model": m.name,
                                "size": 1000 + m.dims,
                                "modified_at": "2025-01-01T00:00:00Z",
                                "digest": hashlib.sha256(m.name.encode()).hexdigest(),
                                "details": {"family": m.family, "parameter_size": "300M", "quantization_level": "Q8_0"},
                            }
                            for m in server.models.values()
                        ]
                    },
                )
            if self.path == "/v1/models":
                if not self._authorized():
                    return
                return self._send(
                    200,
                    {
                        "object": "list",
                        "data": [
                            {"id": m.name.removesuffix(":latest"), "object": "model"} for m in server.models.values()
                        ],
                    },
                )
            self._error(404, "not found")

        def do_POST(self):
            body = self._body()
            if not self._prelude(body):
                return
            route = {
                "/api/embed": self._api_embed,
                "/api/show": self._api_show,
                "/api/pull": self._api_pull,
                "/api/generate": self._api_generate,
                "/api/chat": self._api_chat,
                "/v1/embeddings": self._v1_embeddings,
                "/v1/chat/completions": self._v1_chat,
                "/v1/rerank": self._v1_rerank,
                "/rerank": self._tei_rerank,
            }.get(self.path)
            if route is None:
                return self._error(404, "not found")
            route(body)

        def _authorized(self) -> bool:
            if server.api_key and self.headers.get("Authorization") != f"Bearer {server.api_key}":
                self._send(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
                return False
            return True

        def _api_embed(self, body: dict) -> None:
            name = body.get("model") or ""
            model = server.model(name)
            if model is None:
                return self._missing(name)
            if model.kind != "embedding":
                return self._error(400, f'"{name}" does not support embeddings')
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else texts
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                return self._error(400, "invalid input type")
            vectors = server._embed(model, texts)
            self._send(
                200, {"model": name, "embeddings": vectors, "prompt_eval_count": sum(len(t.split()) for t in texts)}
            )

        def _api_show(self, body: dict) -> None:
            name = body.get("model") or body.get("name") or ""
            model = server.model(name)
            if model is None:
                return self._missing(name)
            info = {"general.architecture": model.family}
            if model.show_dims:
                info[f"{model.family}.embedding_length"] = model.dims
            self._send(
                200,
                {
                    "details": {"family": model.family, "parameter_size": "300M", "quantization_level": "Q8_0"},
                    "model_info": info,
                    "capabilities": ["embedding"] if model.kind == "embedding" else ["completion"],
                },
            )

        def _api_pull(self, body: dict) -> None:
            name = _tagged(body.get("model") or body.get("name") or "")
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()

            def line(obj: dict) -> None:
                data = json.dumps(obj).encode() + b"\n"
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            line({"status": "pulling manifest"})
            model = server.pullable.get(name)
            if model is None:
                line({"error": "pull model manifest: file does not exist"})
            else:
                digest = "sha256:" + hashlib.sha256(name.encode()).hexdigest()
                for done in (0, 400, 1000):
                    line({"status": f"pulling {digest[7:19]}", "digest": digest, "total": 1000, "completed": done})
                line({"status": "verifying sha256 digest"})
                line({"status": "writing manifest"})
                server.models[name] = model
                line({"status": "success"})
            self.wfile.write(b"0\r\n\r\n")

        def _completion_model(self, body: dict) -> FakeModel | None:
            name = body.get("model") or ""
            model = server.model(name)
            if model is None:
                self._missing(name)
            return model

        def _api_generate(self, body: dict) -> None:
            if self._completion_model(body) is not None:
                self._send(200, server._generate(body))

        def _api_chat(self, body: dict) -> None:
            if self._completion_model(body) is None:
                return
            answer = server._chat(body)
            if not body.get("stream"):
                return self._send(200, answer)
            pieces = _pieces(answer["message"]["content"])
            lines = [
                {"model": answer["model"], "message": {"role": "assistant", "content": piece}, "done": False}
                for piece in pieces
            ]
            lines.append(
                {
                    "model": answer["model"],
                    "message": {"role": "assistant", "content": ""},
                    "done": True,
                    "prompt_eval_count": _count(body),
                    "eval_count": len(pieces),
                }
            )
            self._stream(lines, "application/x-ndjson", lambda obj: json.dumps(obj).encode() + b"\n")

        def _stream(self, objects: list, content_type: str, encode) -> None:
            """Send the objects one chunk each, `stream_delay` apart; count a reader who left."""
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for n, obj in enumerate(objects):
                    if n and server.stream_delay:
                        time.sleep(server.stream_delay)
                    data = encode(obj)
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                with server._lock:
                    server.stream_closed_early += 1
                self.close_connection = True

        def _v1_model(self, body: dict) -> FakeModel | None:
            if not self._authorized():
                return None
            name = body.get("model") or ""
            model = server.model(name)
            if model is None:
                self._send(
                    404,
                    {
                        "error": {
                            "message": f"The model `{name}` does not exist.",
                            "type": "invalid_request_error",
                            "code": "model_not_found",
                        }
                    },
                )
            return model

        def _v1_embeddings(self, body: dict) -> None:
            model = self._v1_model(body)
            if model is None:
                return
            texts = body.get("input")
            texts = [texts] if isinstance(texts, str) else texts
            vectors = server._embed(model, texts)
            # Answer in reverse order: clients must use `index`, as the spec allows.
            data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)][::-1]
            self._send(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model"),
                    "usage": {"prompt_tokens": 0, "total_tokens": 0},
                },
            )

        def _v1_rerank(self, body: dict) -> None:
            if "rerank" not in server.rerank_apis:
                return self._error(404, "not found")
            if self._v1_model(body) is None:
                return
            documents = body.get("documents")
            if not isinstance(body.get("query"), str) or not isinstance(documents, list):
                return self._error(400, "query and documents are required")
            scored = [
                {"index": i, "relevance_score": server.rerank_score(body["query"], str(d))}
                for i, d in enumerate(documents)
            ]
            scored.sort(key=lambda r: -r["relevance_score"])
            self._send(
                200,
                {
                    "model": body.get("model"),
                    "results": scored[: int(body.get("top_n") or len(scored))],
                    "usage": {"total_tokens": 0},
                },
            )

        def _tei_rerank(self, body: dict) -> None:
            if "tei" not in server.rerank_apis:
                return self._error(404, "not found")
            texts = body.get("texts")
            if not isinstance(body.get("query"), str) or not isinstance(texts, list):
                return self._send(422, {"error": "query and texts are required", "error_type": "Validation"})
            scored = [{"index": i, "score": server.rerank_score(body["query"], str(t))} for i, t in enumerate(texts)]
            self._send(200, sorted(scored, key=lambda r: -r["score"]))

        def _v1_chat(self, body: dict) -> None:
            if self._v1_model(body) is None:
                return
            answer = server._chat(body)
            if body.get("stream"):
                pieces = _pieces(answer["message"]["content"])
                events = [
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion.chunk",
                        "model": body.get("model"),
                        "choices": [{"index": 0, "delta": {"content": piece}}],
                    }
                    for piece in pieces
                ]
                events.append(
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion.chunk",
                        "model": body.get("model"),
                        "choices": [],
                        "usage": {"prompt_tokens": _count(body), "completion_tokens": len(pieces)},
                    }
                )
                events.append("[DONE]")
                return self._stream(
                    events,
                    "text/event-stream",
                    lambda obj: (
                        b"data: " + (obj.encode() if isinstance(obj, str) else json.dumps(obj).encode()) + b"\n\n"
                    ),
                )
            choice = {"index": 0, "message": answer["message"], "finish_reason": "stop"}
            if body.get("logprobs"):
                choice["logprobs"] = {"content": answer.get("logprobs") or []}
            self._send(
                200,
                {"id": "chatcmpl-test", "object": "chat.completion", "model": body.get("model"), "choices": [choice]},
            )

    return Handler


def _count(body: dict) -> int:
    """A prompt's "tokens": its words."""
    return sum(len(str(m.get("content") or "").split()) for m in body.get("messages") or [])
