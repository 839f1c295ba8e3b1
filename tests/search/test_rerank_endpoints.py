"""Re-ranking through rerank endpoints (`/v1/rerank`, TEI's `/rerank`) of the Ollama-API test
server: one request scores a batch, detection, caching and the same degradation as the chat method."""

from __future__ import annotations

import json
import math

import pytest

from indexing.errors import LLMBadResponse, LLMEndpointMissing
from indexing.llm import get_backend, make_backend, rerank_backend
from indexing.llm.base import rerank_scores
from search.pipeline import rerank as rerank_module
from search.pipeline.rerank import RerankItem, rerank

pytest_plugins = ["tests.support.ollama_fixtures"]
pytestmark = pytest.mark.django_db

MODEL = "bge-reranker-v2-m3"
QUERY = "postgres vacuum tuning"
DOCS = {
    "bread": "baking sourdough bread in a hot oven",
    "vacuum": "tuning postgres autovacuum so vacuum runs more often",
    "garden": "growing tomatoes with deep watering",
    "indexes": "postgres index types for full text search",
    "rust": "the rust borrow checker rejects dangling references",
}


@pytest.fixture
def server(ollama_openai):
    """The test server through its OpenAI-compatible routes, a re-ranker model loaded, and
    no method remembered from an earlier test (the server's URL is the same for all)."""
    ollama_openai.add_model(MODEL, kind="completion", family="bert")
    rerank_module._methods.clear()
    yield ollama_openai
    rerank_module._methods.clear()


def items() -> list[RerankItem]:
    return [RerankItem(key=key, text=text) for key, text in DOCS.items()]


def ranked(outcome) -> list[str]:
    return sorted(outcome.scores, key=lambda key: -outcome.scores[key])


def test_v1_rerank_scores_every_candidate_in_one_request(server):
    server.rerank_apis = {"rerank"}
    outcome = rerank(backend=get_backend(), model=MODEL, query=QUERY, items=items(), api="rerank")
    calls = server.requests_to("/v1/rerank")
    assert len(calls) == 1
    assert calls[0].body == {"model": MODEL, "query": QUERY, "documents": list(DOCS.values()), "top_n": 5}
    assert outcome.method == "rerank" and outcome.judged == 5 and not outcome.error
    assert ranked(outcome)[0] == "vacuum"
    assert all(0.0 <= s <= 1.0 for s in outcome.scores.values())
    assert not server.requests_to("/v1/chat/completions")


def test_scores_are_cached_per_candidate(server):
    server.rerank_apis = {"rerank"}
    first = rerank(backend=get_backend(), model=MODEL, query=QUERY, items=items(), api="rerank")
    again = rerank(backend=get_backend(), model=MODEL, query=QUERY, items=items(), api="rerank")
    assert len(server.requests_to("/v1/rerank")) == 1
    assert again.cached == 5 and again.judged == 0 and again.scores == first.scores


def test_tei_shape_goes_to_the_server_root(server):
    server.rerank_apis = {"tei"}
    outcome = rerank(backend=get_backend(), model=MODEL, query=QUERY, items=items(), api="tei")
    calls = server.requests_to("/rerank")
    assert len(calls) == 1 and calls[0].body["texts"] == list(DOCS.values()) and calls[0].body["query"] == QUERY
    assert outcome.method == "tei" and ranked(outcome)[0] == "vacuum"


def test_batches_split_the_candidates(server):
    server.rerank_apis = {"rerank"}
    outcome = rerank(backend=get_backend(), model=MODEL, query=QUERY, items=items(), api="rerank", batch=2)
    assert [len(c.body["documents"]) for c in server.requests_to("/v1/rerank")] in ([2, 2, 1], [2, 1, 2], [1, 2, 2])
    assert outcome.judged == 5 and ranked(outcome)[0] == "vacuum"


def test_auto_detects_tei_and_remembers_it(server):
    server.rerank_apis = {"tei"}
    outcome = rerank(backend=get_backend(), model=MODEL, query=QUERY, items=items(), api="auto")
    assert outcome.method == "tei" and ranked(outcome)[0] == "vacuum"
    assert len(server.requests_to("/v1/rerank")) == 1  # asked first, 404
    server.requests.clear()
    rerank(backend=get_backend(), model=MODEL, query="sourdough bread", items=items(), api="auto")
    assert not server.requests_to("/v1/rerank") and len(server.requests_to("/rerank")) == 1


def test_auto_falls_back_to_chat_when_the_server_has_no_rerank_endpoint(server):
    server.chat_handler = lambda body: (
        "yes" if "vacuum" in body["messages"][-1]["content"].split("<Document>")[-1] else "no"
    )
    outcome = rerank(backend=get_backend(), model=MODEL, query=QUERY, items=items(), api="auto")
    assert outcome.method == "logprobs" and not outcome.error
    assert len(server.requests_to("/v1/chat/completions")) == 5
    assert ranked(outcome)[0] == "vacuum"


def test_raw_logits_become_confidences(server):
    server.rerank_apis = {"rerank"}
    server.rerank_raw = True
    outcome = rerank(backend=get_backend(), model=MODEL, query=QUERY, items=items(), api="rerank")
    assert all(0.0 < s < 1.0 for s in outcome.scores.values())
    assert ranked(outcome)[0] == "vacuum"


def test_missing_model_degrades_like_the_chat_method(server):
    server.rerank_apis = {"rerank"}
    outcome = rerank(backend=get_backend(), model="no-such-reranker", query=QUERY, items=items(), api="rerank")
    assert outcome.scores == {} and "no-such-reranker" in outcome.error


def test_server_down_is_an_error_not_an_exception(server, settings):
    server.rerank_apis = {"rerank"}
    server.stop()
    settings.PMD_LLM_RETRIES = 0
    outcome = rerank(backend=get_backend(retries=0), model=MODEL, query=QUERY, items=items(), api="rerank")
    assert outcome.scores == {} and "not reachable" in outcome.error


def test_slow_server_leaves_the_candidates_unjudged(server):
    server.rerank_apis = {"rerank"}
    server.delay = 1.5
    outcome = rerank(backend=get_backend(), model=MODEL, query=QUERY, items=items(), api="rerank", timeout=0.3)
    assert outcome.scores == {} and outcome.unjudged == 5
    assert any("stopped after 0.3s" in w for w in outcome.warnings)


def test_a_reranker_of_its_own_next_to_ollama(ollama, settings):
    """PMD_RERANK_URL: embeddings from Ollama, re-ranking from a llama.cpp/TEI server elsewhere."""
    ollama.rerank_apis = {"rerank"}
    ollama.add_model(MODEL, kind="completion")
    settings.PMD_RERANK_URL = ollama.openai_url
    backend = rerank_backend()
    assert backend.kind == "openai" and backend.base_url == ollama.openai_url
    assert get_backend().kind == "ollama"
    rerank_module._methods.clear()
    outcome = rerank(backend=backend, model=MODEL, query=QUERY, items=items(), api="auto")
    rerank_module._methods.clear()
    assert outcome.method == "rerank" and ranked(outcome)[0] == "vacuum"


def test_endpoint_missing_is_its_own_error(server):
    backend = make_backend("openai", url=server.openai_url, retries=0)
    with pytest.raises(LLMEndpointMissing):
        backend.rerank(QUERY, ["x"], model=MODEL, api="rerank")


# --- answer shapes ---------------------------------------------------------------------------


def test_answers_in_either_shape_are_put_back_in_input_order():
    cohere = {"results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.2}]}
    tei = [{"index": 1, "score": 0.7}, {"index": 0, "score": 0.1}]
    assert rerank_scores(cohere, 2, url="u") == [0.2, 0.9]
    assert rerank_scores(tei, 2, url="u") == [0.1, 0.7]


def test_logits_get_a_sigmoid():
    scores = rerank_scores([{"index": 0, "score": 3.0}, {"index": 1, "score": -2.0}], 2, url="u")
    assert scores == pytest.approx([1 / (1 + math.exp(-3)), 1 / (1 + math.exp(2))])


def test_an_answer_missing_documents_is_refused():
    with pytest.raises(LLMBadResponse, match="scored 1 of 2"):
        rerank_scores({"results": [{"index": 0, "relevance_score": 0.5}]}, 2, url="u")


# --- pmd models list ---------------------------------------------------------------------------


def test_models_list_says_how_each_model_is_used(server, run_cli, settings):
    settings.PMD_RERANK_MODEL = MODEL
    settings.PMD_RERANK_API = "tei"
    code, out, err = run_cli("models", "list", "--json")
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)["models"]}
    assert rows[MODEL]["methods"] == {"rerank": "POST /rerank (TEI)"}
    assert rows["embeddinggemma"]["methods"] == {"embed": "embeddings"}
    settings.PMD_RERANK_API = "auto"
    rows = {r["name"]: r for r in json.loads(run_cli("models", "list", "--json")[1])["models"]}
    assert rows[MODEL]["methods"]["rerank"].startswith("auto: /v1/rerank")
    server.rerank_apis = {"rerank"}
    rerank(backend=get_backend(), model=MODEL, query=QUERY, items=items(), api="auto")
    code, out, _ = run_cli("models", "list")
    assert "POST /v1/rerank" in out and "auto" not in out
