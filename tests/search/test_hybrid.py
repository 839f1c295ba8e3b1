"""`pmd query` end to end through the Ollama-API test server: fusion, expansion,
re-ranking, explain, and every degradation path (down, model missing, slow)."""

from __future__ import annotations

import json
import math
import time

import pytest

from indexing.access import Access
from search.pipeline.deadline import wait_for_stragglers
from search.pipeline.hybrid import hybrid_search, strong_signal
from search.request import Mode, SearchRequest
from search.results import SearchResult
from tests.support.factories import api_client, make_user

pytest_plugins = ["tests.support.ollama_fixtures"]
# Retrieval runs in worker threads with their own database connections: they must see
# committed data, so these tests use real transactions.
pytestmark = pytest.mark.django_db(transaction=True)

RERANKER = "test-reranker"

DOCS = {
    "postgres-vacuum.md": "# Tuning PostgreSQL autovacuum\n\nLower autovacuum_vacuum_scale_factor so vacuum runs "
    "after fewer dead tuples. Dead rows bloat tables and slow every query.\n",
    "postgres-indexes.md": "# PostgreSQL index types\n\nB-tree, GIN and BRIN indexes serve different queries; "
    "GIN suits full text search over tsvector columns.\n",
    "bread.md": "# Baking sourdough bread\n\nFeed the starter flour and water, let the dough rise overnight, "
    "bake in a hot oven until the crust is dark.\n",
    "garden.md": "# Growing tomatoes\n\nTomatoes want sun, deep watering and support stakes; prune the suckers "
    "for larger fruit.\n",
    "docker.md": "# Docker volumes\n\nNamed volumes keep database data when a container is recreated; bind mounts "
    "map a host folder into the container.\n",
    "rust.md": "# The Rust borrow checker\n\nA reference must not outlive the value it borrows; the borrow checker "
    "rejects programs that would leave dangling references.\n",
}


@pytest.fixture
def kb(tmp_path, ollama, settings):
    """A small knowledge base, indexed and embedded through the test server."""
    from indexing.services.collections import collection_create
    from indexing.services.embedding import embed_pending
    from indexing.services.scanning import collection_index

    root = tmp_path / "kb"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text)
    settings.PMD_CHUNK_TOKENS = 200
    settings.PMD_GENERATE_MODEL = "qwen3:0.6b"
    settings.PMD_RERANK_MODEL = RERANKER
    settings.PMD_QUERY_TIMEOUT = 20.0
    settings.PMD_EXPAND_TIMEOUT = 5.0
    settings.PMD_RERANK_TIMEOUT = 5.0
    ollama.add_model(RERANKER, kind="completion", family="qwen3")
    collection_index(collection_create(path=root, name="kb"))
    embed_pending()
    ollama.requests.clear()
    yield ollama
    assert wait_for_stragglers(30), "a pipeline thread outlived its test"


def req(query: str, **kwargs) -> SearchRequest:
    kwargs.setdefault("limit", 6)
    return SearchRequest(query=query, mode=Mode.HYBRID, **kwargs, access=Access.local_user())


def paths(response) -> list[str]:
    return [r.path for r in response.results]


def expansion_answer(*variants: tuple[str, str]) -> str:
    return json.dumps({"variants": [{"type": t, "text": x} for t, x in variants]})


def yes_no(probability: float) -> dict:
    """A chat answer as Qwen3-Reranker gives it: the first token with yes/no log-probabilities."""
    token = "yes" if probability >= 0.5 else "no"
    return {
        "message": {"role": "assistant", "content": token},
        "logprobs": [
            {
                "token": token,
                "logprob": math.log(max(probability, 1 - probability)),
                "top_logprobs": [
                    {"token": "yes", "logprob": math.log(probability)},
                    {"token": "no", "logprob": math.log(1 - probability)},
                ],
            }
        ],
    }


def judge_by_word(word: str):
    """A re-ranker that says yes (0.95) to documents containing `word`, no (0.05) to the rest."""

    def handler(body):
        document = body["messages"][-1]["content"].split("<Document>:", 1)[-1]
        return yes_no(0.95 if word in document.lower() else 0.05)

    return handler


# --- the pipeline without LLM stages -----------------------------------------------------------


def test_fuses_keyword_and_vector_lists(kb):
    response = hybrid_search(req("postgres vacuum dead tuples", expand=False, rerank=False, explain=True))
    assert response.mode == Mode.HYBRID and response.as_dict()["mode"] == "query"
    assert paths(response)[0] == "postgres-vacuum.md"
    top = response.results[0]
    assert set(top.explain["lists"]) == {"original/keyword", "original/vector"}
    fusion = top.explain["fusion"]
    assert fusion["w_keyword"] + fusion["w_vector"] == pytest.approx(1.0, abs=1e-3)
    assert 0 < fusion["w_keyword"] < 1 and set(top.explain["z"]) == {"keyword", "vector"}
    assert top.explain["fused"] == pytest.approx(
        fusion["w_keyword"] * top.explain["z"]["keyword"] + fusion["w_vector"] * top.explain["z"]["vector"], abs=1e-3
    )
    # shown: the #1's own evidence, w_k·keyword share + w_v·cosine, not a rescaled 1.0
    evidence = top.explain["evidence"]
    expected = fusion["w_keyword"] * evidence.get("keyword", 0) + fusion["w_vector"] * evidence.get("vector", 0)
    assert top.score == pytest.approx(expected, abs=1e-3) and top.score < 1.0
    assert top.scores["rerank"] is None
    assert [r.score for r in response.results] == sorted((r.score for r in response.results), reverse=True)
    assert {"keyword", "retrieve", "fusion", "blend", "total"} <= set(response.timings)
    assert not kb.requests_to("/api/generate") and not kb.requests_to("/api/chat")


def test_strong_signal_rule():
    def results(*scores):
        return [SearchResult(docid="x", collection="c", path=str(i), title="", score=s) for i, s in enumerate(scores)]

    assert strong_signal(results(0.9, 0.7))
    assert strong_signal(results(0.86))
    assert not strong_signal(results(0.9, 0.8))  # not far enough ahead
    assert not strong_signal(results(0.8, 0.1))  # not high enough
    assert not strong_signal([])


def test_candidate_limit_bounds_reranking_and_the_rest_follows(kb):
    kb.chat_handler = judge_by_word("tomatoes")
    response = hybrid_search(req("postgres bread tomatoes docker rust", expand=False, candidate_limit=2, explain=True))
    assert len(kb.requests_to("/api/chat")) == 2
    judged = [r for r in response.results if not r.explain["beyond_candidate_limit"]]
    rest = [r for r in response.results if r.explain["beyond_candidate_limit"]]
    assert len(judged) == 2 and rest
    assert min(r.score for r in judged) > max(r.score for r in rest)


# --- expansion ------------------------------------------------------------------------------------


def test_expansion_variants_go_to_their_retrievers_and_are_cached(kb):
    kb.generate_handler = lambda body: expansion_answer(
        ("lex", "sourdough starter"),
        ("vec", "how to bake bread at home"),
        ("hyde", "Feed the starter flour and water and bake the dough in a hot oven."),
    )
    response = hybrid_search(req("loaf", rerank=False, explain=True))
    (call,) = kb.requests_to("/api/generate")
    assert call.body["model"] == "qwen3:0.6b" and call.body["format"]["required"] == ["variants"]
    assert paths(response)[0] == "bread.md"
    lists = response.results[0].explain["lists"]
    assert {"lex 1/keyword", "vec 1/vector", "hyde/vector"} <= set(lists)
    assert response.results[0].explain["plan"]["source"] == "model"
    assert "expand" in response.timings

    again = hybrid_search(req("loaf", rerank=False, explain=True))
    assert len(kb.requests_to("/api/generate")) == 1  # served from the LLM cache
    assert again.results[0].explain["plan"]["source"] == "cache"
    assert paths(again) == paths(response)


def test_messy_expansion_output_is_still_used(kb):
    kb.generate_handler = lambda body: (
        "<think>bread</think>Sure! Here you go:\n```json\n"
        + expansion_answer(("lex", "sourdough"), ("lex", "Sourdough"), ("vec", "loaf"), ("vec", "baking bread"))
        + "\n```\nEnjoy!"
    )
    response = hybrid_search(req("loaf", rerank=False, explain=True))
    variants = response.results[0].explain["plan"]["variants"]
    assert variants == [{"type": "lex", "text": "sourdough"}, {"type": "vec", "text": "baking bread"}]
    bread = next(r for r in response.results if r.path == "bread.md")
    assert {"lex 1/keyword", "vec 1/vector"} <= set(bread.explain["lists"])
    assert not response.warnings


def test_garbage_expansion_warns_and_searches_as_written(kb):
    kb.generate_handler = lambda body: "I am sorry, I cannot do that."
    response = hybrid_search(req("loaf", rerank=False))
    assert response.results  # the query as written, by vector search
    assert any("no usable variants" in w for w in response.warnings)
    # nothing cached: the next query asks again
    hybrid_search(req("loaf", rerank=False))
    assert len(kb.requests_to("/api/generate")) == 2


def test_strong_keyword_signal_skips_expansion(kb):
    kb.generate_handler = lambda body: expansion_answer(("lex", "sourdough"))
    response = hybrid_search(req("autovacuum_vacuum_scale_factor", rerank=False, explain=True))
    assert paths(response)[0] == "postgres-vacuum.md"
    assert response.results[0].explain["plan"]["strong_signal"] is True
    assert response.results[0].explain["pinned"] is True
    assert not kb.requests_to("/api/generate")


def test_structured_query_document_skips_the_model(kb):
    query = "lex: borrow checker\nvec: dangling references in rust\nintent: programming languages"
    response = hybrid_search(req(query, rerank=False, explain=True))
    assert not kb.requests_to("/api/generate")
    assert paths(response)[0] == "rust.md"
    explain = response.results[0].explain
    assert explain["plan"]["source"] == "user" and explain["plan"]["intent"] == "programming languages"
    assert explain["lists"]["lex 1/keyword"]["rank"] == 1 and explain["lists"]["vec 1/vector"]["rank"] == 1
    # without a plain line, the user's own variants stand for the query: both kinds weigh
    assert explain["fusion"]["w_keyword"] > 0 and explain["fusion"]["w_vector"] > 0


def test_structured_query_without_text_is_a_clear_error(kb):
    from indexing.errors import InvalidSearchInput

    with pytest.raises(InvalidSearchInput, match="no text to search for"):
        hybrid_search(req("intent: nothing\nlex:"))


# --- re-ranking ----------------------------------------------------------------------------------


def test_reranker_confidence_is_blended_and_cached(kb):
    kb.chat_handler = judge_by_word("tomatoes")
    baseline = hybrid_search(req("growing sourdough tomatoes", expand=False, rerank=False))
    response = hybrid_search(req("growing sourdough tomatoes", expand=False, explain=True))
    calls = kb.requests_to("/api/chat")
    assert len(calls) == len(response.results) == len(baseline.results)
    assert calls[0].body["model"] == RERANKER and calls[0].body["logprobs"] is True
    garden = next(r for r in response.results if r.path == "garden.md")
    assert garden.explain["rerank"] == pytest.approx(0.95)
    w = garden.explain["blend_weight"]
    assert garden.score == pytest.approx(w * garden.explain["retrieval"] + (1 - w) * 0.95, abs=1e-5)
    assert paths(response)[0] == "garden.md"
    assert response.results[0].explain["reranker"]["method"] == "logprobs"
    assert "rerank" in response.timings

    hybrid_search(req("growing sourdough tomatoes", expand=False))
    assert len(kb.requests_to("/api/chat")) == len(calls)  # every judgement cached


def test_rating_fallback_when_the_backend_has_no_logprobs(kb):
    from search.pipeline import rerank as rerank_module

    rerank_module._methods.clear()

    def handler(body):
        if body.get("format"):  # the 0-10 rating prompt
            document = body["messages"][-1]["content"].split("Document:", 1)[-1]
            return json.dumps({"score": 9 if "docker" in document.lower() else 1})
        return {"message": {"role": "assistant", "content": "yes"}, "logprobs": []}

    kb.chat_handler = handler
    response = hybrid_search(req("docker postgres data", expand=False, explain=True))
    docker = next(r for r in response.results if r.path == "docker.md")
    assert docker.explain["rerank"] == pytest.approx(0.9)
    assert response.results[0].explain["reranker"]["method"] == "rating"
    assert paths(response)[0] == "docker.md"
    rerank_module._methods.clear()


# --- degradation -----------------------------------------------------------------------------------


def test_ollama_down_gives_keyword_results_with_one_warning(kb, ollama_down):
    response = hybrid_search(req("sourdough bread", explain=True))
    assert paths(response)[0] == "bread.md"
    assert set(response.results[0].explain["lists"]) == {"original/keyword"}
    assert len(response.warnings) == 1 and "not reachable" in response.warnings[0]
    assert "keyword results only" in response.warnings[0]


def test_generate_model_missing_still_fuses_and_reranks(kb, settings):
    settings.PMD_GENERATE_MODEL = "no-such-model"
    kb.chat_handler = judge_by_word("bread")
    response = hybrid_search(req("home loaf", explain=True))
    assert any("query expansion skipped" in w and "no-such-model" in w for w in response.warnings)
    assert "original/vector" in response.results[0].explain["lists"]
    assert response.results[0].explain["rerank"] is not None


def test_reranker_missing_keeps_fusion_order(kb, settings):
    settings.PMD_RERANK_MODEL = "no-such-reranker"
    baseline = hybrid_search(req("postgres index types", expand=False, rerank=False))
    response = hybrid_search(req("postgres index types", expand=False))
    assert paths(response) == paths(baseline)
    assert any("re-ranking skipped" in w and "no-such-reranker" in w for w in response.warnings)


def test_models_switched_off_are_stated(kb, settings):
    settings.PMD_GENERATE_MODEL = "none"
    settings.PMD_RERANK_MODEL = "off"
    response = hybrid_search(req("loaf", explain=True))
    assert response.results
    # A setting, not a failure: stated once in --explain, not as a warning on every query.
    assert not response.warnings
    off = response.results[0].explain["plan"]["off"]
    assert any("PMD_GENERATE_MODEL is not set" in line for line in off)
    assert any("PMD_RERANK_MODEL is not set" in line for line in off)
    assert not kb.requests_to("/api/generate") and not kb.requests_to("/api/chat")


def test_missing_models_are_asked_for_once_then_skipped_quietly(kb, settings):
    """A server without the expansion and re-rank models: one warning, then quiet, no wasted work."""
    settings.PMD_GENERATE_MODEL = "no-such-model"
    settings.PMD_RERANK_MODEL = "no-such-reranker"
    first = hybrid_search(req("home loaf", explain=True))
    assert any("no-such-model" in w for w in first.warnings) and any("no-such-reranker" in w for w in first.warnings)
    second = hybrid_search(req("weekend baking at home", explain=True))
    assert not second.warnings
    asked = kb.requests_to("/api/generate") + kb.requests_to("/api/chat")
    assert asked and not [r for r in asked if "weekend" in json.dumps(r.body)]
    assert "rerank_prepare" not in second.timings and "expand" not in second.timings
    off = second.results[0].explain["plan"]["off"]
    assert any("no-such-model" in line for line in off) and any("no-such-reranker" in line for line in off)


def test_slow_reranker_times_out_and_keeps_fusion_order(kb, settings):
    settings.PMD_RERANK_TIMEOUT = 0.5
    baseline = hybrid_search(req("postgres index types", expand=False, rerank=False))

    def slow(body):
        time.sleep(2.0)
        return yes_no(0.9)

    kb.chat_handler = slow
    response = hybrid_search(req("postgres index types", expand=False))
    assert paths(response) == paths(baseline)
    assert any("re-ranking stopped after 0.5s" in w for w in response.warnings)


def test_slow_expansion_is_skipped(kb, settings):
    settings.PMD_EXPAND_TIMEOUT = 0.5

    def slow(body):
        time.sleep(2.0)
        return expansion_answer(("lex", "sourdough"))

    kb.generate_handler = slow
    response = hybrid_search(req("loaf", rerank=False))
    assert response.results
    assert any("took longer than 0.5s" in w for w in response.warnings)


def test_unreachable_vector_stage_within_the_overall_deadline(kb, settings):
    """A server that answers nothing in time: the query still returns keyword results."""
    settings.PMD_QUERY_TIMEOUT = 1.0
    kb.delay = 3.0
    response = hybrid_search(req("sourdough bread"))
    assert paths(response)[0] == "bread.md"
    assert response.warnings
    kb.delay = 0.0


# --- one service, many adapters --------------------------------------------------------------------


def test_cli_json_api_and_service_agree(kb, run_cli, django_user_model):

    kb.chat_handler = judge_by_word("postgres")
    kb.generate_handler = lambda body: expansion_answer(("lex", "postgres"), ("vec", "database maintenance"))
    service = hybrid_search(req("slow queries", limit=5))

    code, out, err = run_cli("query", "slow queries", "-n", "5", "--json")
    assert code == 0, err
    cli = json.loads(out)
    assert [r["uri"] for r in cli["results"]] == [r.uri for r in service.results]
    assert [r["score"] for r in cli["results"]] == pytest.approx([r.score for r in service.results])
    assert "fused" in cli["results"][0]["scores"] and "total" in cli["timings_ms"]

    user = make_user("reader")
    client = api_client(user)
    answer = client.post("/api/query", {"query": "slow queries", "limit": 5}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert [r["uri"] for r in answer.json()["results"]] == [r.uri for r in service.results]


def test_cli_explain_and_options(kb, run_cli):
    kb.chat_handler = judge_by_word("rust")
    code, out, err = run_cli(
        "query", "borrow", "checker", "--no-expand", "-C", "3", "--explain", "--intent", "programming"
    )
    assert code == 0, err
    assert "explain:" in out and "original/keyword" in out and "timings:" in out
    assert "blend 0.75 × retrieval" in out and "w_keyword" in out and "z_vector" in out
    assert not kb.requests_to("/api/generate")
    assert "programming" in kb.requests_to("/api/chat")[0].body["messages"][-1]["content"]

    code, out, err = run_cli("query", "x", "-C", "0")
    assert code == 1 and "candidate-limit" in err
    code, out, err = run_cli("query", "lex:")
    assert code == 1 and "no text to search for" in err


def test_unknown_collection_is_a_clear_error_even_for_vector_only_plans(kb):
    from indexing.errors import CollectionNotFound

    with pytest.raises(CollectionNotFound, match="no collection named 'nope'"):
        hybrid_search(req("vec: anything", collections=["nope"]))


def test_the_deadline_counts_from_the_start_not_from_the_end_of_alongside():
    from search.pipeline.deadline import run_concurrently

    def slow_alongside():
        time.sleep(0.3)
        return "keyword"

    def late():  # done after alongside, but before alongside + timeout
        time.sleep(0.6)
        return "late"

    outcome = run_concurrently({"fast": lambda: "fast", "late": late}, timeout=0.4, alongside=slow_alongside)
    assert outcome.alongside == "keyword"
    assert outcome.results == {"fast": "fast"}  # finished while alongside ran: still collected
    assert outcome.timed_out == ["late"]
    assert wait_for_stragglers(5)


def test_the_vector_list_commitment_is_read_above_the_index_chance_cosine(kb, monkeypatch):
    from search.retrieval import vector as vector_module

    def vector_nqc():
        response = hybrid_search(req("postgres vacuum dead tuples", expand=False, rerank=False, explain=True))
        return response.results[0].explain["fusion"]["nqc"]["vector"]

    raw = vector_nqc()  # this small index has too few chunks for a chance cosine: raw cosines
    monkeypatch.setattr(vector_module, "chance_cosine", lambda fingerprint: 0.5)
    above = vector_nqc()
    assert above > raw > 0
