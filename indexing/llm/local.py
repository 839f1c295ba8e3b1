"""The in-process backend (PMD_LLM_BACKEND=local): embeddings and cross-encoder re-ranking on the CPU.

A machine without Ollama still gets vectors. ONNX Runtime runs the model and Hugging Face
`tokenizers` cuts the text, both from the `local` extra (`pip install 'pmd[local]'`); why
these and not fastembed or sentence-transformers is in the README (Models).

A model is a folder in the sentence-transformers layout: `model.onnx` (or `onnx/model.onnx`),
`tokenizer.json`, `config.json`, and for embedding models `sentence_bert_config.json` (the
window) and `1_Pooling/config.json` (how token vectors become one). PMD_EMBED_MODEL (and
PMD_RERANK_MODEL) is either a path to such a folder or a hub name, downloaded on first use
into $PMD_HOME/models. Each process loads a model once and runs one inference at a time
with PMD_LOCAL_THREADS threads, so a web server answering several queries at once does not
oversubscribe the CPU that the worker also embeds on.
"""

from __future__ import annotations

import ctypes
import json
import logging
import math
import os
import shutil
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from django.conf import settings

from indexing.errors import LLMBackendError, LLMBackendUnavailable, LLMModelMissing
from indexing.llm.base import ChatResult, LLMBackend, ModelInfo, ProgressCallback, PullProgress
from indexing.llm.quantize import int8_model

logger = logging.getLogger(__name__)

# Multilingual (about 100 languages, 384 dims, 512 word pieces, mean pooling, `query: `/`passage: `
# prefixes): an English-only default left every other language's notes to keyword search alone.
DEFAULT_EMBED_MODEL = "intfloat/multilingual-e5-small"
MINILM = "sentence-transformers/all-MiniLM-L6-v2"  # the default before: English only, 5x smaller
DEFAULT_RERANK_MODEL = "cross-encoder/ms-marco-MiniLM-L6-v2"
# Short names people use for the same hub models.
ALIASES = {
    "multilingual-e5-small": DEFAULT_EMBED_MODEL,
    "all-minilm": MINILM,
    "all-minilm-l6-v2": MINILM,
    "ms-marco-minilm-l6-v2": DEFAULT_RERANK_MODEL,
    "ms-marco-minilm-l-6-v2": DEFAULT_RERANK_MODEL,
}
# The window of a hub model before it is downloaded (afterwards its own config says).
KNOWN_WINDOWS = {DEFAULT_EMBED_MODEL: 512, MINILM: 256}
DOWNLOAD_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
)
ONNX_FILES = ("model.onnx", "onnx/model.onnx")
# Texts per inference: bounds the attention buffers (batch × heads × window²) that ONNX Runtime's
# arena keeps for the life of the process. 8 instead of 16: the embedder's peak 590 instead of
# 830 MB on 256-piece chunks, at the same CPU time per passage (scripts/bench/embed.py).
# PMD_LOCAL_BATCH changes it (`pmd up --profile small`: 2).
SUB_BATCH = 8


# --- model folders -------------------------------------------------------------------------


def hub_name(model: str) -> str:
    return ALIASES.get(model.strip().lower(), model.strip())


def is_path(model: str) -> bool:
    return model.startswith(("/", "~", "./", "../")) or (os.sep in model and Path(model).expanduser().is_dir())


def download_dir(models_dir: Path, model: str) -> Path:
    """Where a hub model lives under $PMD_HOME/models (`owner/name` → `owner--name`)."""
    return models_dir / hub_name(model).replace("/", "--")


def onnx_file(folder: Path) -> Path | None:
    return next((folder / name for name in ONNX_FILES if (folder / name).is_file()), None)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def model_setting(model: str, unknown: str = "PMD_EMBED_MODEL") -> str:
    """The variable that names `model` (what a message tells the user to change): the re-ranker's
    cross-encoder is PMD_RERANK_MODEL, not the embedding model's variable."""
    for name in ("PMD_RERANK_MODEL", "PMD_GENERATE_MODEL", "PMD_EMBED_MODEL"):
        if model and getattr(settings, name, None) == model:
            return name
    return unknown


@dataclass(frozen=True)
class FolderConfig:
    """What the folder's config files say about running the model."""

    window: int
    pooling: str  # "mean" or "cls"
    normalize: bool
    family: str

    @classmethod
    def read(cls, folder: Path) -> FolderConfig:
        config = _read_json(folder / "config.json")
        sbert = _read_json(folder / "sentence_bert_config.json")
        tokenizer = _read_json(folder / "tokenizer_config.json")
        limits = [
            int(v)
            for v in (
                sbert.get("max_seq_length"),
                config.get("max_position_embeddings"),
                tokenizer.get("model_max_length"),
            )
            if isinstance(v, int) and 0 < v < 100_000
        ]
        window = int(sbert["max_seq_length"]) if isinstance(sbert.get("max_seq_length"), int) else min(limits or [512])
        pooling_config = _read_json(folder / "1_Pooling" / "config.json")
        pooling = "cls" if pooling_config.get("pooling_mode_cls_token") else "mean"
        modules = json.dumps(_read_json(folder / "modules.json")) if (folder / "modules.json").is_file() else ""
        normalize = "Normalize" in modules or not modules
        return cls(
            window=min(window, 512), pooling=pooling, normalize=normalize, family=str(config.get("model_type", ""))
        )


def model_window(model: str, models_dir: Path) -> int | None:
    """The model's window in word pieces, without loading or downloading it (None: unknown)."""
    folder = Path(model).expanduser() if is_path(model) else download_dir(models_dir, model)
    if (folder / "config.json").is_file():
        return FolderConfig.read(folder).window
    return KNOWN_WINDOWS.get(hub_name(model))


QUERY_TEXTS = 4  # an embedding call of at most this many texts is a query's (bulk embedding sends batches)


class QueriesFirst:
    """One inference at a time, and a query waiting goes before bulk work: a search in the web
    server used to wait behind every queued batch of an in-process embedding run."""

    def __init__(self):
        self._turn = threading.Condition()
        self._busy = False
        self._queries_waiting = 0

    @contextmanager
    def hold(self, *, query: bool):
        with self._turn:
            self._queries_waiting += query
            try:
                while self._busy or (not query and self._queries_waiting):
                    self._turn.wait()
            finally:
                self._queries_waiting -= query
            self._busy = True
        try:
            yield
        finally:
            with self._turn:
                self._busy = False
                self._turn.notify_all()


# --- loading -------------------------------------------------------------------------------


class _Loaded:
    """One model in memory: its ONNX session, tokenizer and a lock (one inference at a time, queries first)."""

    def __init__(self, folder: Path, threads: int, *, pairs: bool, batch: int = SUB_BATCH, path: Path | None = None):
        self.batch = batch
        try:
            import numpy as np  # noqa: PLC0415 - the optional extra `local` (onnxruntime brings numpy)
            import onnxruntime as ort  # noqa: PLC0415 - the optional extra `local`
            from tokenizers import Tokenizer  # noqa: PLC0415 - the optional extra `local`
        except ImportError as exc:
            raise LLMBackendUnavailable(
                "local",
                message=f"PMD_LLM_BACKEND=local needs the local extra ({exc.name} is missing): "
                "pip install 'pmd[local]' (./scripts/bootstrap installs it)",
            ) from None
        self.np = np
        self.config = FolderConfig.read(folder)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # Idle threads sleep instead of spinning: the web server, the worker and PostgreSQL share
        # the cores (measured under load: query vectors 9 instead of 33 ms, embedding +20 %).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # No memory pattern: it keeps a planned block per input shape for the life of the session,
        # and length-sorted sub-batches come in every width (96 passages: 375 instead of 515 MB).
        options.enable_mem_pattern = False
        path = path or onnx_file(folder)  # the int8 copy, or the file as exported
        self.path = path
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(self.config.window)  # pairs: the longer text is cut first
        self.tokenizer.no_padding()
        pad = _read_json(folder / "config.json").get("pad_token_id", 0)
        self.pad_id = int(pad) if isinstance(pad, int) else 0
        self.lock = QueriesFirst()
        give_back_free_memory()

    def _feed(self, encodings):
        np = self.np
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(encodings), width), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        types = np.zeros((len(encodings), width), dtype=np.int64)
        for row, e in enumerate(encodings):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
            types[row, : len(e.type_ids)] = e.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return {name: value for name, value in feed.items() if name in self.inputs}, mask

    def _in_length_order(self, encodings, run):
        """Run sub-batches of similar length (less padding), answers back in input order."""
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        answers: list = [None] * len(encodings)
        for start in range(0, len(order), self.batch):
            part = order[start : start + self.batch]
            for index, value in zip(part, run([encodings[i] for i in part])):
                answers[index] = value
        return answers

    def embed(self, texts: list[str]) -> list[list[float]]:
        np = self.np
        query = len(texts) <= QUERY_TEXTS

        def run(encodings):
            feed, mask = self._feed(encodings)
            with self.lock.hold(query=query):
                outputs = dict(zip(self.outputs, self.session.run(None, feed)))
            if "sentence_embedding" in outputs:
                vectors = outputs["sentence_embedding"]
            else:
                hidden = outputs[self.outputs[0]]
                if self.config.pooling == "cls":
                    vectors = hidden[:, 0]
                else:
                    weights = mask[..., None].astype(hidden.dtype)
                    vectors = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            if self.config.normalize:
                vectors = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
            return vectors.astype(np.float32).tolist()

        return self._in_length_order(self.tokenizer.encode_batch(texts), run)

    def score(self, query: str, documents: list[str]) -> list[float]:
        np = self.np

        def run(encodings):
            feed, _ = self._feed(encodings)
            with self.lock.hold(query=True):  # re-ranking is always a query's
                logits = np.asarray(self.session.run(None, feed)[0], dtype=np.float64)
            logits = logits.reshape(len(encodings), -1)
            if logits.shape[1] == 1:
                return [1.0 / (1.0 + math.exp(-float(x))) for x in logits[:, 0]]
            # two classes (not relevant, relevant): the softmax of the second
            shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
            return (shifted[:, -1] / shifted.sum(axis=1)).tolist()

        return self._in_length_order(self.tokenizer.encode_batch([(query, d) for d in documents]), run)


def give_back_free_memory() -> None:
    """Return the C heap's free pages to the system (glibc's malloc_trim). Loading a model leaves
    about 115 MB of freed scratch (the graph optimiser's copies of the weights) that glibc would
    otherwise keep for the life of the process, in the web server and the embedder alike."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to give back this way
        pass


_loaded: dict[tuple, _Loaded] = {}
_load_lock = threading.Lock()


# --- the backend ---------------------------------------------------------------------------


class LocalBackend(LLMBackend):
    """Runs models in this process; no server, no HTTP."""

    kind = "local"

    def __init__(
        self,
        models_dir: Path,
        *,
        threads: int = 0,
        allow_download: bool = True,
        batch: int = 0,
        precision: str = "fp32",
        **_ignored,
    ):
        self.models_dir = Path(models_dir)
        self.precision = precision
        self.batch = batch if batch > 0 else SUB_BATCH
        self.base_url = f"local:{self.models_dir}"
        self.threads = threads if threads > 0 else max(1, min(4, os.cpu_count() or 1))
        self.allow_download = allow_download
        self.timeout = 0.0
        self.retries = 0

    def __repr__(self) -> str:
        return f"<LocalBackend {self.models_dir}>"

    def close(self) -> None:
        pass

    # -- models ------------------------------------------------------------------------

    def folder(self, model: str, *, download: bool | None = None, progress: ProgressCallback | None = None) -> Path:
        """The model's folder, downloading a hub model that is not there yet."""
        if is_path(model):
            folder = Path(model).expanduser()
            if not folder.is_dir():
                raise LLMModelMissing(
                    model,
                    message=f"model folder {folder} does not exist: fix the path in "
                    f"{model_setting(model, 'PMD_EMBED_MODEL / PMD_RERANK_MODEL')}",
                )
            if onnx_file(folder) is None or not (folder / "tokenizer.json").is_file():
                raise LLMModelMissing(
                    model,
                    message=f"model folder {folder} needs model.onnx (or onnx/model.onnx) and tokenizer.json: "
                    "the local backend runs ONNX exports (sentence-transformers layout)",
                )
            return folder
        folder = download_dir(self.models_dir, model)
        if onnx_file(folder) is not None and (folder / "tokenizer.json").is_file():
            return folder
        if not (self.allow_download if download is None else download):
            raise LLMModelMissing(model, message=f"model {hub_name(model)} is not in {self.models_dir}")
        self._download(hub_name(model), folder, progress, setting=model_setting(model))
        return folder

    def _download(
        self, repo: str, folder: Path, progress: ProgressCallback | None, *, setting: str = "PMD_EMBED_MODEL"
    ) -> None:
        advice = (
            "on a machine with internet pull the models, or copy the model's folder "
            f"(model.onnx, tokenizer.json, config.json…) there and set {setting}=/path/to/folder"
        )
        try:
            from huggingface_hub import HfApi, hf_hub_download  # noqa: PLC0415 - the optional extra `local`
        except ImportError:
            raise LLMBackendUnavailable(
                "local", message="downloading models needs the local extra: pip install 'pmd[local]'"
            ) from None
        endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
        try:  # one quick look first: the hub client retries for half a minute before it gives up
            if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}:
                raise OSError("HF_HUB_OFFLINE is set")
            httpx.head(endpoint, timeout=5.0)
        except (OSError, httpx.HTTPError) as exc:
            raise LLMBackendUnavailable(
                "local", message=f"cannot download {repo}: {endpoint} is not reachable ({exc}); {advice}"
            ) from None
        logger.warning("downloading %s into %s (first use)", repo, folder)
        try:
            files = set(HfApi().list_repo_files(repo))
            weights = next((name for name in ONNX_FILES[::-1] if name in files), None)
            if weights is None:
                raise LLMModelMissing(
                    repo,
                    message=f"{repo} has no ONNX export (model.onnx or onnx/model.onnx): "
                    "the local backend cannot run it; pick a model that has one",
                )
            # A file missing at the top may sit beside the ONNX export (onnx/tokenizer.json): taken from there.
            wanted = [
                name if name in files else f"onnx/{name}"
                for name in DOWNLOAD_FILES
                if name in files or f"onnx/{name}" in files
            ] + [weights]
            for done, name in enumerate(wanted):
                if progress is not None:
                    progress(PullProgress(status=f"downloading {name}", completed=done, total=len(wanted)))
                hf_hub_download(repo, name, local_dir=str(folder))  # shows its own progress bar
                if name.startswith("onnx/") and name != weights:
                    shutil.copyfile(folder / name, folder / name.removeprefix("onnx/"))
        except LLMBackendError:
            raise
        except Exception as exc:  # noqa: BLE001 - the hub client raises many kinds: offline, 404, proxy…
            raise LLMBackendUnavailable(
                "local",
                message=f"cannot download {repo} into {folder} ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:200] if str(exc) else 'no answer'}): {advice}",
            ) from None
        if progress is not None:
            progress(PullProgress(status="success", completed=len(wanted), total=len(wanted)))

    def _model(self, model: str, *, pairs: bool = False) -> _Loaded:
        folder = self.folder(model).resolve()
        # Embedding models only: the re-ranker's quality under int8 is not measured.
        int8 = self.precision == "int8" and not pairs
        key = (os.getpid(), str(folder), self.threads, pairs, int8, self.batch)
        loaded = _loaded.get(key)
        if loaded is not None:
            return loaded
        path = None
        if int8:  # made outside the lock: other models (and queries) go on meanwhile
            path = int8_model(onnx_file(folder), self.models_dir)
        with _load_lock:
            loaded = _loaded.get(key)
            if loaded is None:
                try:
                    loaded = _Loaded(folder, self.threads, pairs=pairs, batch=self.batch, path=path)
                except LLMBackendError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a broken or foreign ONNX file, said as a missing model
                    raise LLMModelMissing(
                        model, message=f"cannot load the model in {folder}: {type(exc).__name__}: {exc}"
                    ) from None
                _loaded[key] = loaded
            return loaded

    def has_model(self, model: str) -> bool:
        try:
            self.folder(model, download=False)
        except LLMBackendError:
            return False
        return True

    def list_models(self) -> list[ModelInfo]:
        models = []
        folders = sorted(p for p in self.models_dir.glob("*") if p.is_dir()) if self.models_dir.is_dir() else []
        for folder in folders:
            if onnx_file(folder) is None:
                continue
            size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file() and ".cache" not in f.parts)
            models.append(
                ModelInfo(name=folder.name.replace("--", "/", 1), size=size, family=FolderConfig.read(folder).family)
            )
        return models

    def pull(self, model: str, *, progress: ProgressCallback | None = None) -> None:
        """Download the model, and make its int8 copy now rather than at the first embedding (on
        a small box, before the services run: making it holds several times the file in memory)."""
        folder = self.folder(model, download=True, progress=progress)
        reranker = model_setting(model, "") == "PMD_RERANK_MODEL" or hub_name(model) == DEFAULT_RERANK_MODEL
        if self.precision == "int8" and not reranker:
            if progress is not None:
                progress(PullProgress(status="making the int8 copy", completed=0, total=1))
            int8_model(onnx_file(folder), self.models_dir)

    # -- operations ----------------------------------------------------------------------

    def embed(self, texts: list[str], *, model: str) -> list[list[float]]:
        if not texts:
            return []
        return self._model(model).embed(list(texts))

    def rerank(self, query: str, documents: list[str], *, model: str, api: str = "local") -> list[float]:
        """Cross-encoder relevance of each document to the query, 0..1, in order."""
        if not documents:
            return []
        return self._model(model, pairs=True).score(query, list(documents))

    def generate(self, prompt: str, *, model: str, **kwargs) -> str:
        raise LLMBackendError(
            "the local backend runs embedding and re-ranking models only: query expansion "
            "needs PMD_LLM_BACKEND=ollama or openai (or leave PMD_GENERATE_MODEL empty)"
        )

    def chat(self, messages: list[dict], *, model: str, **kwargs) -> ChatResult:
        return ChatResult(content=self.generate("", model=model))
