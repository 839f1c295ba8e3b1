"""The LLM backend clients against the Ollama-compatible test server (real HTTP)."""

from __future__ import annotations

import pytest

from indexing.errors import LLMBackendError, LLMBackendTimeout, LLMBackendUnavailable, LLMBadResponse, LLMModelMissing
from indexing.llm import embedding_prompts, get_backend, make_backend
from indexing.llm.prompts import prompts_for
from tests.support.ollama_server import embed_text


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b))


# --- Ollama --------------------------------------------------------------------------


def test_embed_sends_one_batched_request_and_keeps_order(ollama):
    texts = ["postgres vacuum tuning", "baking sourdough bread", "vacuum the postgres tables"]
    vectors = get_backend().embed(texts, model="embeddinggemma")
    assert [len(v) for v in vectors] == [768, 768, 768]
    assert vectors == [embed_text(t, 768) for t in texts]
    embed_requests = ollama.requests_to("/api/embed")
    assert len(embed_requests) == 1
    assert embed_requests[0].body["input"] == texts
    # the test server's vectors carry lexical similarity
    assert cosine(vectors[0], vectors[2]) > cosine(vectors[0], vectors[1])


def test_embed_of_nothing_makes_no_request(ollama):
    assert get_backend().embed([], model="embeddinggemma") == []
    assert ollama.requests_to("/api/embed") == []


def test_dimensions_come_from_show(ollama):
    ollama.add_model("tiny-embed", dims=32)
    assert get_backend().embedding_dims("tiny-embed") == 32
    assert ollama.requests_to("/api/embed") == [], "no embedding needed when /api/show tells"


def test_dimensions_fall_back_to_a_probe_embedding(ollama):
    ollama.add_model("quiet-embed", dims=48, show_dims=False)
    assert get_backend().embedding_dims("quiet-embed") == 48
    assert len(ollama.requests_to("/api/embed")) == 1


def test_missing_model_says_how_to_pull_it(ollama):
    with pytest.raises(LLMModelMissing) as caught:
        get_backend().embed(["x"], model="nomic-embed-text")
    assert str(caught.value) == "model nomic-embed-text is not pulled (`ollama pull nomic-embed-text`)"
    with pytest.raises(LLMModelMissing):
        get_backend().embedding_dims("nomic-embed-text")


def test_a_server_that_is_not_ollama_is_named(ollama):
    backend = make_backend("ollama", url=ollama.url + "/not-ollama", retries=0)
    with pytest.raises(LLMBadResponse, match=r"does not exist \(404\): is .*/not-ollama really an Ollama server"):
        backend.embed(["x"], model="embeddinggemma")


def test_server_down_is_a_clear_error(ollama_down):
    with pytest.raises(LLMBackendUnavailable) as caught:
        get_backend().embed(["x"], model="embeddinggemma")
    assert str(caught.value).startswith(
        f"Ollama is not reachable at {ollama_down}: start it (`ollama serve` / the compose `ollama` service)"
    )


def test_transient_server_errors_are_retried(ollama):
    ollama.fail_next(2, status=503)
    vectors = get_backend().embed(["retry me"], model="embeddinggemma")
    assert vectors == [embed_text("retry me", 768)]
    assert len(ollama.requests_to("/api/embed")) == 3


def test_persistent_server_errors_give_up_after_the_retries(ollama, settings):
    ollama.fail_always = 500
    with pytest.raises(LLMBadResponse, match="500"):
        get_backend().embed(["x"], model="embeddinggemma")
    assert len(ollama.requests_to("/api/embed")) == settings.PMD_LLM_RETRIES + 1


def test_client_errors_are_not_retried(ollama):
    ollama.fail_next(1, status=400)
    with pytest.raises(LLMBadResponse, match="400"):
        get_backend().embed(["x"], model="embeddinggemma")
    assert len(ollama.requests_to("/api/embed")) == 1


def test_slow_server_times_out(ollama, settings):
    settings.PMD_LLM_TIMEOUT = 0.2
    ollama.delay = 1.0
    with pytest.raises(LLMBackendTimeout, match="did not answer within 0.2s"):
        get_backend().embed(["x"], model="embeddinggemma")


def test_server_that_comes_back_is_used_again(ollama):
    backend = get_backend()
    backend.embed(["first"], model="embeddinggemma")
    ollama.restart()
    assert backend.embed(["second"], model="embeddinggemma") == [embed_text("second", 768)]


def test_list_and_has_model_accept_names_without_tag(ollama):
    backend = get_backend()
    names = {m.name for m in backend.list_models()}
    assert names == {"embeddinggemma:latest", "qwen3:0.6b"}
    assert backend.has_model("embeddinggemma")
    assert backend.has_model("qwen3:0.6b")
    assert not backend.has_model("qwen3")


def test_pull_reports_progress_and_the_model_appears(ollama):
    ollama.offer_for_pull("all-minilm", dims=384, family="bert")
    seen = []
    backend = get_backend()
    backend.pull("all-minilm", progress=seen.append)
    assert seen[0].status == "pulling manifest"
    assert seen[-1].status == "success"
    assert [p.completed for p in seen if p.total] == [0, 400, 1000]
    assert backend.has_model("all-minilm")
    assert backend.embedding_dims("all-minilm") == 384


def test_pull_of_an_unknown_model_fails_clearly(ollama):
    with pytest.raises(LLMBackendError, match="cannot pull no-such-model: pull model manifest: file does not exist"):
        get_backend().pull("no-such-model")


def test_chat_passes_schema_and_returns_logprobs(ollama):
    received = {}

    def handler(body):
        received.update(body)
        return {
            "message": {"role": "assistant", "content": '{"relevant": "yes"}'},
            "logprobs": [
                {
                    "token": "yes",
                    "logprob": -0.1,
                    "top_logprobs": [{"token": "yes", "logprob": -0.1}, {"token": "no", "logprob": -2.4}],
                }
            ],
        }

    ollama.chat_handler = handler
    schema = {"type": "object", "properties": {"relevant": {"enum": ["yes", "no"]}}, "required": ["relevant"]}
    result = get_backend().chat(
        [{"role": "user", "content": "is it relevant?"}],
        model="qwen3:0.6b",
        format=schema,
        logprobs=True,
        top_logprobs=2,
        think=False,
        options={"temperature": 0},
    )
    assert result.json() == {"relevant": "yes"}
    assert result.logprobs[0].token == "yes"
    assert result.logprobs[0].top == (("yes", -0.1), ("no", -2.4))
    assert received["format"] == schema
    assert received["logprobs"] is True and received["top_logprobs"] == 2
    assert received["think"] is False and received["stream"] is False
    assert received["options"] == {"temperature": 0}


def test_generate_returns_the_response_text(ollama):
    ollama.generate_handler = lambda body: f"expanded: {body['prompt']}"
    assert get_backend().generate("vector search", model="qwen3:0.6b", format="json") == "expanded: vector search"
    assert ollama.requests_to("/api/generate")[0].body["format"] == "json"


def test_non_json_chat_answer_is_reported_when_json_was_wanted(ollama):
    ollama.chat_handler = lambda body: "not json at all"
    result = get_backend().chat([{"role": "user", "content": "hi"}], model="qwen3:0.6b", format="json")
    with pytest.raises(LLMBadResponse, match="did not answer valid JSON"):
        result.json()


# --- OpenAI-compatible ------------------------------------------------------------------


def test_openai_embeddings_are_ordered_by_index(ollama_openai):
    texts = ["one fish", "two fish", "red fish"]
    vectors = get_backend().embed(texts, model="embeddinggemma")
    assert vectors == [pytest.approx(embed_text(t, 768)) for t in texts]
    assert ollama_openai.requests_to("/v1/embeddings")[0].body["input"] == texts


def test_openai_models_and_probe_dimensions(ollama_openai):
    backend = get_backend()
    assert backend.has_model("embeddinggemma")
    assert backend.embedding_dims("embeddinggemma") == 768


def test_openai_missing_model_and_bad_key(ollama_openai, settings):
    with pytest.raises(LLMModelMissing, match="not served by the OpenAI-compatible server"):
        get_backend().embed(["x"], model="absent")
    ollama_openai.api_key = "sekret"
    with pytest.raises(LLMBadResponse, match="check PMD_OPENAI_API_KEY"):
        get_backend().embed(["x"], model="embeddinggemma")
    settings.PMD_OPENAI_API_KEY = "sekret"
    assert len(get_backend().embed(["x"], model="embeddinggemma")[0]) == 768


def test_openai_chat_maps_schema_and_logprobs(ollama_openai):
    ollama_openai.chat_handler = lambda body: '{"answer": 1}'
    result = get_backend().chat(
        [{"role": "user", "content": "q"}], model="qwen3:0.6b", format={"type": "object"}, logprobs=True, top_logprobs=3
    )
    body = ollama_openai.requests_to("/v1/chat/completions")[0].body
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert body["logprobs"] is True and body["top_logprobs"] == 3
    assert result.json() == {"answer": 1}
    assert result.logprobs and result.logprobs[0].logprob == pytest.approx(-0.05)


def test_openai_backend_cannot_pull(ollama_openai):
    with pytest.raises(LLMBackendError, match="cannot pull models"):
        get_backend().pull("embeddinggemma")


def test_openai_server_down(settings, ollama_down):
    settings.PMD_LLM_BACKEND = "openai"
    settings.PMD_OPENAI_BASE_URL = ollama_down + "/v1"
    with pytest.raises(LLMBackendUnavailable, match="OpenAI-compatible server is not reachable"):
        get_backend().embed(["x"], model="m")


# --- factory and prompts -------------------------------------------------------------------


def test_factory_follows_settings(ollama, settings):
    first = get_backend()
    assert get_backend() is first, "one client per configuration"
    settings.PMD_LLM_BACKEND = "openai"
    settings.PMD_OPENAI_BASE_URL = ollama.openai_url
    assert get_backend().kind == "openai"
    settings.PMD_LLM_BACKEND = "llamafile"
    with pytest.raises(LLMBackendError, match="not a backend pmd knows"):
        get_backend()
    with pytest.raises(LLMBackendError):
        make_backend("nope", url="http://x")


def test_prompt_formats_per_model(settings):
    gemma = prompts_for("embeddinggemma:latest")
    assert gemma.format_query("what is hnsw") == "task: search result | query: what is hnsw"
    assert gemma.format_document("chunk text", title="HNSW") == "title: HNSW | text: chunk text"
    assert gemma.format_document("chunk text") == "title: none | text: chunk text"
    e5 = prompts_for("multilingual-e5-small")
    assert (e5.format_query("q"), e5.format_document("d")) == ("query: q", "passage: d")
    plain = prompts_for("all-minilm")
    assert (plain.format_query("q {x}"), plain.format_document("d", title="t")) == ("q {x}", "d")
    assert prompts_for("nomic-embed-text").format_query("q") == "search_query: q"

    settings.PMD_EMBED_MODEL = "all-minilm"
    settings.PMD_EMBED_QUERY_PROMPT = "Q: {query}"
    settings.PMD_EMBED_DOC_PROMPT = "D: {title} / {text}"
    configured = embedding_prompts()
    assert configured.format_query("x") == "Q: x"
    assert configured.format_document("body", title="T") == "D: T / body"
    assert configured.digest != plain.digest
    assert embedding_prompts("embeddinggemma") == gemma, "overrides apply to the configured model only"
