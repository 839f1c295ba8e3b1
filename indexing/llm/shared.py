"""One copy of the in-process models for all of `pmd up`'s processes.

With PMD_LLM_BACKEND=local every process that embedded a query or re-ranked loaded its own
copy of the models (the web server 350 MB with one, the embedder as much again plus its
arena). Under `pmd up` the process that embeds (the embedder, or the one worker of the small
profile) serves its models on a Unix socket, PMD_MODEL_SOCKET, in a private folder; the other
processes send it their query vectors and re-ranking and load no model themselves. A query
goes before the embedder's bulk batches (local.QueriesFirst).

The protocol is one JSON request per connection, one line each way: {"op": "embed"|"rerank",
...} → {"result": [...]} or {"error": {"class": ..., "message": ...}}.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from pathlib import Path

from indexing.errors import LLMBackendError, LLMBackendUnavailable, LLMModelMissing
from indexing.llm.local import LocalBackend

logger = logging.getLogger(__name__)

# A query vector takes milliseconds; a wait longer than this is a worker that is stuck or gone.
CONNECT_TIMEOUT = 2.0
MAX_REQUEST = 16 * 1024 * 1024  # re-ranking sends the candidates' texts

_serving = False  # this process holds the models and answers the socket


def serving_here() -> bool:
    return _serving


class SharedModelsClient(LocalBackend):
    """The local backend of a process that loads no model: embedding and re-ranking go to the
    process serving PMD_MODEL_SOCKET; listing, finding and pulling models work on the folder."""

    def __init__(self, models_dir: Path, socket_path: str, *, threads: int = 0, timeout: float = 120.0, **_ignored):
        super().__init__(models_dir, threads=threads)
        self.socket_path = socket_path
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"<SharedModelsClient {self.socket_path}>"

    def _ask(self, request: dict):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(CONNECT_TIMEOUT)
                sock.connect(self.socket_path)
                sock.settimeout(self.timeout or None)
                sock.sendall(json.dumps(request).encode() + b"\n")
                answer = sock.makefile("rb").readline()
        except OSError as exc:
            raise LLMBackendUnavailable(
                self.socket_path,
                backend="local",
                message=(
                    f"the worker that holds the models does not answer at {self.socket_path} ({exc}): "
                    "it is starting or was stopped (its supervisor restarts it); semantic search and "
                    "re-ranking come back with it"
                ),
            ) from None
        try:
            reply = json.loads(answer)
        except ValueError:
            raise LLMBackendUnavailable(
                self.socket_path,
                backend="local",
                message="the worker that holds the models closed the connection without an answer (restarting?)",
            ) from None
        if "error" in reply:
            error = reply["error"]
            if error.get("class") == "LLMModelMissing":
                raise LLMModelMissing(request.get("model", ""), backend="local", message=error["message"])
            if error.get("class") == "LLMBackendUnavailable":
                raise LLMBackendUnavailable(self.socket_path, backend="local", message=error["message"])
            raise LLMBackendError(error["message"])
        return reply["result"]

    def embed(self, texts: list[str], *, model: str) -> list[list[float]]:
        if not texts:
            return []
        return self._ask({"op": "embed", "texts": list(texts), "model": model})

    def rerank(self, query: str, documents: list[str], *, model: str, api: str = "local") -> list[float]:
        if not documents:
            return []
        return self._ask({"op": "rerank", "query": query, "documents": list(documents), "model": model})


def _answer(conn: socket.socket, backend_for) -> None:
    with conn:
        try:
            line = conn.makefile("rb").readline(MAX_REQUEST)
            request = json.loads(line)
            backend = backend_for()
            if request["op"] == "embed":
                result = backend.embed(request["texts"], model=request["model"])
            elif request["op"] == "rerank":
                result = backend.rerank(request["query"], request["documents"], model=request["model"])
            else:
                raise LLMBackendError(f"unknown operation {request['op']!r}")
            reply = {"result": result}
        except LLMBackendError as exc:
            reply = {"error": {"class": type(exc).__name__, "message": str(exc)}}
        except Exception as exc:  # a bad request must not end the server thread
            logger.exception("model socket request failed")
            reply = {"error": {"class": type(exc).__name__, "message": f"{type(exc).__name__}: {exc}"}}
        try:
            conn.sendall(json.dumps(reply).encode() + b"\n")
        except OSError:
            pass  # the asker gave up (its query deadline)


def serve_models(path: str, backend_for) -> socket.socket:
    """Answer PMD_MODEL_SOCKET from this process (a thread per request) with `backend_for()`'s
    models, which then load here only. Returns the listening socket (closing it stops serving)."""
    global _serving
    _serving = True
    try:
        os.unlink(path)  # a socket left by a worker that was killed
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)  # only pmd's user may ask (the folder is private too)
    try:
        listener.bind(path)
    finally:
        os.umask(old_umask)
    listener.listen(16)

    def accept() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=_answer, args=(conn, backend_for), daemon=True, name="pmd-models").start()

    threading.Thread(target=accept, daemon=True, name="pmd-models-socket").start()
    return listener
