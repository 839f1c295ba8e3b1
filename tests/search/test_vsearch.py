"""Vector search: ranking, snippets, filters, the HNSW plan, errors, the CLI."""

from __future__ import annotations

import json
import shutil

import pytest

from indexing.access import Access
from indexing.errors import CollectionNotFound, InvalidSearchInput, LLMBackendUnavailable, NotEmbedded
from indexing.llm import get_backend
from indexing.models import EmbeddingFingerprint
from indexing.services.embedding import embed_pending
from indexing.services.scanning import collection_index
from search.request import Mode, SearchRequest
from search.retrieval.vector import explain_nearest, vector_search

pytestmark = pytest.mark.django_db


@pytest.fixture
def embedded(indexed_collection, ollama, settings):
    settings.PMD_CHUNK_TOKENS = 40
    settings.PMD_EMBED_BATCH = 4
    embed_pending()
    return indexed_collection


def vsearch(query: str, **kwargs):
    return vector_search(SearchRequest(query=query, mode=Mode.VECTOR, **kwargs, access=Access.local_user()))


def test_nearest_document_comes_first_with_its_best_passage(embedded, corpus_dir):
    response = vsearch("pgvector HNSW graphs nearest neighbour ef_search")
    top = response.results[0]
    assert (top.collection, top.path, top.title) == (
        "notes",
        "guides/postgres-tuning.md",
        "Tuning PostgreSQL for search",
    )
    assert 0 < top.score <= 1 and top.scores["cosine"] == pytest.approx(top.score, abs=1e-6)
    assert [r.score for r in response.results] == sorted((r.score for r in response.results), reverse=True)
    body_lines = (corpus_dir / "guides" / "postgres-tuning.md").read_text().split("\n")
    # the snippet is whole lines of the document starting at `line`, around the HNSW passage
    snippet_lines = top.snippet.split("\n")
    assert body_lines[top.line - 1 : top.line - 1 + len(snippet_lines)] == snippet_lines
    assert "HNSW" in top.snippet
    marked = {top.snippet[s:e].lower() for s, e in top.highlights}
    assert {"pgvector", "hnsw"} <= marked
    assert response.mode == Mode.VECTOR and response.as_dict()["mode"] == "vsearch" and "nearest" in response.timings


def test_a_repeated_query_is_not_embedded_again(embedded, ollama):
    first = vsearch("blue green deploy")
    calls = ollama.embed_calls
    again = vsearch("blue green deploy")
    assert ollama.embed_calls == calls, "the query vector came from the LLM cache"
    assert [r.uri for r in again.results] == [r.uri for r in first.results]
    ollama.stop()
    assert vsearch("blue green deploy").results, "a cached query works even with the backend down"


def test_one_result_per_document_unless_more_are_asked(embedded):
    single = vsearch("postgres search documents HNSW", limit=10)
    uris = [r.uri for r in single.results]
    assert len(uris) == len(set(uris))
    several = vsearch("postgres search documents HNSW", limit=10, hits_per_document=3)
    tuning = [r for r in several.results if r.path == "guides/postgres-tuning.md"]
    assert 2 <= len(tuning) <= 3
    assert len({r.line for r in tuning}) == len(tuning)


def test_limit_min_score_and_collections(embedded, tmp_path):
    from indexing.services.collections import collection_create

    assert len(vsearch("notes", limit=2).results) == 2
    assert all(r.score >= 0.2 for r in vsearch("kubernetes", limit=10, min_score=0.2).results)
    garden_dir = tmp_path / "garden"
    garden_dir.mkdir()
    (garden_dir / "tomatoes.md").write_text("# Tomatoes\n\nKubernetes of the garden: tomatoes need sun.\n")
    collection_index(collection_create(path=garden_dir, name="garden"))
    embed_pending()
    only = vsearch("kubernetes", collections=["garden"], limit=10)
    assert [r.path for r in only.results] == ["tomatoes.md"]
    with pytest.raises(CollectionNotFound, match="no collection named 'gardn'"):
        vsearch("kubernetes", collections=["gardn"])


def test_identical_files_are_both_found(embedded, corpus_dir):
    shutil.copy(corpus_dir / "meetings" / "no-heading.md", corpus_dir / "copy-of-note.md")
    collection_index(embedded)
    embed_pending()
    paths = [r.path for r in vsearch("plain note kubernetes", limit=3).results]
    assert set(paths[:2]) == {"meetings/no-heading.md", "copy-of-note.md"}


def test_documents_not_embedded_yet_are_reported(embedded, corpus_dir):
    (corpus_dir / "new.md").write_text("# New\n\nFresh text about sourdough.\n")
    collection_index(embedded)
    response = vsearch("sourdough")
    assert any("1 document(s) have no embeddings yet" in w for w in response.warnings)
    assert "new.md" not in [r.path for r in response.results]


def test_the_planner_uses_the_hnsw_index(embedded):
    fingerprint = EmbeddingFingerprint.objects.get()
    vector = get_backend().embed(["task: search result | query: hnsw"], model="embeddinggemma")[0]
    plan = explain_nearest(fingerprint, vector, k=10)
    assert f"Index Scan using {fingerprint.hnsw_index_name}" in plan
    exact = explain_nearest(fingerprint, vector, k=10, exact=True)
    assert fingerprint.hnsw_index_name not in exact


def test_a_halfvec_index_answers_vector_search(embedded, settings):
    """PMD_VECTOR_STORAGE=halfvec: the next index build holds half-precision vectors (the other
    index is dropped), vector search plans through it, and it answers as exact search does."""
    from indexing.services.embedding import hnsw_index_ensure, hnsw_index_exists, hnsw_index_name

    fingerprint = EmbeddingFingerprint.objects.get()
    full = hnsw_index_name(fingerprint)
    settings.PMD_VECTOR_STORAGE = "halfvec"
    assert not hnsw_index_exists(fingerprint) and hnsw_index_ensure(fingerprint)
    half = hnsw_index_name(fingerprint)
    assert half != full and hnsw_index_exists(fingerprint)
    vector = get_backend().embed(["task: search result | query: hnsw"], model="embeddinggemma")[0]
    plan = explain_nearest(fingerprint, vector, k=10)
    assert f"Index Scan using {half}" in plan and "halfvec" in plan
    settings.PMD_VECTOR_STORAGE = "vector"
    assert not hnsw_index_exists(fingerprint), "the full-precision index was dropped"
    settings.PMD_VECTOR_STORAGE = "halfvec"
    for query in ("deploy blue green", "vector index rollout", "pgvector HNSW graphs nearest neighbour"):
        approximate = [r.uri for r in vsearch(query, limit=5).results]
        exact = [
            r.uri
            for r in vector_search(
                SearchRequest(query=query, mode=Mode.VECTOR, limit=5, access=Access.local_user()), exact=True
            ).results
        ]
        assert approximate == exact and approximate


def test_index_and_exact_search_agree_on_a_small_corpus(embedded):
    for query in ("deploy blue green", "vector index rollout", "ts_rank BM25"):
        approximate = [r.uri for r in vsearch(query, limit=5).results]
        exact = [
            r.uri
            for r in vector_search(
                SearchRequest(query=query, mode=Mode.VECTOR, limit=5, access=Access.local_user()), exact=True
            ).results
        ]
        assert approximate == exact


def test_nothing_embedded_yet(indexed_collection, ollama):
    with pytest.raises(NotEmbedded, match="^nothing is embedded with embeddinggemma yet$"):
        vsearch("anything")


def test_while_a_worker_embeds_no_advice_to_run_pmd_embed(embedded, corpus_dir, indexed_collection, run_cli):
    from indexing.models import Job

    (corpus_dir / "new.md").write_text("# New\n\nFresh text about sourdough.\n")
    collection_index(embedded)
    Job.objects.create(kind=Job.Kind.EMBED, state=Job.State.QUEUED)  # a worker will take it
    [warning] = [w for w in vsearch("sourdough").warnings if "no embeddings yet" in w]
    assert "queued for embedding" in warning and "pmd embed" not in warning
    EmbeddingFingerprint.objects.all().delete()  # nothing embedded at all, embedding on its way
    code, _, err = run_cli("vsearch", "sourdough")
    assert code == 1 and "queued for embedding" in err and "pmd embed" not in err
    Job.objects.all().delete()  # nothing on its way: the advice comes back
    code, _, err = run_cli("vsearch", "sourdough")
    assert code == 1 and "run `pmd embed`" in err


def test_another_model_is_never_mixed_in(embedded, ollama, settings):
    ollama.add_model("tiny-embed", dims=64)
    settings.PMD_EMBED_MODEL = "tiny-embed"
    with pytest.raises(
        NotEmbedded, match=r"holds embeddings from embeddinggemma \(768d, 40 tokens/chunk\), not from tiny-embed"
    ):
        vsearch("kubernetes")


def test_backend_down_is_a_clear_error_and_keyword_search_still_works(embedded, ollama):
    from search.retrieval.keyword import keyword_search

    ollama.stop()
    with pytest.raises(LLMBackendUnavailable, match="Ollama is not reachable at"):
        vsearch("kubernetes")
    found = keyword_search(SearchRequest(query="kubernetes", mode=Mode.KEYWORD, access=Access.local_user()))
    assert [r.path for r in found.results] == ["meetings/no-heading.md"]


def test_empty_query_is_refused(embedded):
    with pytest.raises(InvalidSearchInput, match="empty query"):
        vsearch("   ")


def test_cli_vsearch_formats_and_errors(embedded, ollama, run_cli, caplog):
    code, out, err = run_cli("vsearch", "kubernetes", "plain", "note", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["mode"] == "vsearch"
    assert data["results"][0]["uri"] == "pmd://notes/meetings/no-heading.md"
    code, out, err = run_cli("vsearch", "plain note kubernetes", "--files", "-n", "1")
    assert code == 0 and out.count("\n") == 1 and "pmd://notes/meetings/no-heading.md" in out
    ollama.stop()
    caplog.clear()
    code, out, err = run_cli("vsearch", "kubernetes")
    assert code == 1
    assert "Ollama is not reachable at" in err and "Traceback" not in err
    assert not [r for r in caplog.records if r.exc_info], "an expected outage logs no traceback"


def test_bench_vsearch_modes_on_a_tiny_dataset(ollama, settings, tmp_path, monkeypatch):
    from pmd_site.bench import vector as bench_vector
    from pmd_site.bench.modes import MODES
    from pmd_site.bench.quality import BenchOptions

    settings.PMD_CHUNK_TOKENS = 40
    docs = tmp_path / "tiny" / "docs"
    docs.mkdir(parents=True)
    topics = {
        "d1": "tomato garden sun water",
        "d2": "postgres vacuum index tuning",
        "d3": "rust borrow checker lifetimes",
        "d4": "sourdough bread starter flour",
        "d5": "kubernetes pods deployment rollout",
    }
    for doc_id, words in topics.items():
        (docs / f"{doc_id}.md").write_text(f"# {words.split()[0].title()}\n\n{words} " * 3 + "\n")
    (tmp_path / "tiny" / "queries.tsv").write_text("q1\tgarden tomato sun\nq2\tvacuum postgres\nq3\tbread flour\n")
    (tmp_path / "tiny" / "qrels.tsv").write_text("q1\td1\t1\nq2\td2\t1\nq3\td4\t1\n")

    report = MODES["vsearch"](str(tmp_path / "tiny"), BenchOptions())
    lines = dict(report.lines)
    assert report.data["metrics"]["nDCG@10"] > 0.8  # lexical test embeddings: the topic words win
    assert report.data["hnsw"]["recall"] == pytest.approx(1.0)
    assert "chunks/s" in lines["embedded"] and "pipeline overhead" in lines
    assert set(report.data["stages_p50_ms"]) >= {"embed_query", "nearest"}

    monkeypatch.setattr(bench_vector, "SCALE_TARGET", 300)
    scale = MODES["vsearch-scale"](str(tmp_path / "tiny"), BenchOptions())
    assert scale.data["vectors"] >= 300 and 0.5 <= scale.data["hnsw"]["recall"] <= 1.0
    assert EmbeddingFingerprint.objects.count() == 1, "the scratch vectors are gone"


def test_snippet_of_a_chunk_inside_one_long_paragraph():
    from search.retrieval.vector import chunk_snippet

    sentences = [f"Sentence {i} talks about topic{i} in some detail." for i in range(60)]
    body = "# Title\n\n" + " ".join(sentences) + "\n"
    start = body.index("Sentence 40")
    snippet, line, highlights = chunk_snippet(body, start, len(body), {"topic44"})
    assert line == 3
    assert snippet.startswith("…") and "topic44" in snippet and len(snippet) <= 302
    assert [snippet[s:e] for s, e in highlights] == ["topic44"]
    assert "Sentence 10 " not in snippet, "only text from the chunk"


def _chunks(fingerprint, vectors):
    from indexing.models import Chunk, Content

    for i, vector in enumerate(vectors):
        content, _ = Content.objects.get_or_create(hash=f"{i:064x}", defaults={"body": f"note {i}"})
        Chunk.objects.create(
            fingerprint=fingerprint, content=content, seq=0, char_start=0, char_end=6, embedding=vector
        )


def test_chance_cosine_is_the_median_cosine_of_unrelated_chunks(monkeypatch):
    """Fusion reads a vector list's commitment above this (search.pipeline.fusion, 3.)."""
    from search.retrieval import vector as vector_module

    monkeypatch.setattr(vector_module, "_chance", {})
    small = EmbeddingFingerprint.objects.create(key="chance-small", model="m", dims=3)
    _chunks(small, [[1.0, 0.0, 0.0]] * 10)
    assert vector_module.chance_cosine(small) is None  # too few chunks to say
    band = EmbeddingFingerprint.objects.create(key="chance-band", model="m", dims=3)
    # three directions 60° apart (cosine 0.5); the sample's halves pair chunks of different ones
    _chunks(
        band,
        [
            [1.0, 0.0, 0.0] if i % 3 == 0 else [0.5, 0.8660254, 0.0] if i % 3 == 1 else [0.5, 0.2886751, 0.8164966]
            for i in range(80)
        ],
    )
    value = vector_module.chance_cosine(band)
    assert value == pytest.approx(0.5, abs=1e-4)
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        assert vector_module.chance_cosine(band) == value
    assert not queries.captured_queries  # kept per process
