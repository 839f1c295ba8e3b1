"""Shown scores mean the same across queries: a weak best match reads weak."""

import pytest

from indexing.access import Access
from search.pipeline.hybrid import hybrid_search
from search.request import Mode, SearchRequest
from search.retrieval.keyword import keyword_search

pytest_plugins = ["tests.support.ollama_fixtures"]

DOCS = {
    "contributing.md": "# Contributing guide\n\nHow do I make a pull request? Make a branch, install the tools, "
    "make your change and install the hooks. We make releases often.\n",
    "ci.md": "# Reproducible CI builds\n\nPin every dependency with a lockfile so CI installs are reproducible: "
    "the same versions on every run.\n",
    "bread.md": "# Baking bread\n\nFlour, water, salt and time make a loaf.\n",
    "garden.md": "# Tomatoes\n\nWater deeply, stake the plants and make room for the roots.\n",
}


@pytest.fixture
def notes(db, tmp_path):
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    root = tmp_path / "notes"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text)
    collection_index(collection_create(path=root, name="notes"))


def search(query):
    return keyword_search(SearchRequest(query=query, mode=Mode.KEYWORD, limit=10, access=Access.local_user())).results


def test_a_match_on_common_words_only_reads_low(notes):
    # "reproducible", "lockfile" and "deterministic" are not in the contributing guide; the words
    # it shares ("make", "install") are common. The question's rare word ("deterministic")
    # is in no note at all: it still counts in what a full match would hold.
    results = search("how do I make installs deterministic")
    assert results and results[0].path == "contributing.md"
    assert results[0].score < 0.5


def test_a_match_on_all_rare_words_reads_high(notes):
    results = search("reproducible CI lockfile")
    assert results[0].path == "ci.md" and results[0].score >= 0.8


def test_scores_are_not_rescaled_to_the_top_hit(notes):
    weak, strong = search("make tools"), search("reproducible CI lockfile")
    assert strong[0].score > weak[0].score or weak[0].score < 1.0


@pytest.mark.parametrize("query", ["make", "water make", "how do I make installs deterministic", "make tools"])
def test_keyword_scores_fall_with_the_order(notes, query):
    """`pmd search` showed 93 %, 100 %, 71 %, 73 %: a score above the hit ranked over it."""
    results = search(query)
    assert len(results) >= 2
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)
    # Only BM25 ties tie; a one-word query's hits do not all read 100 %.
    assert all(a.score > b.score for a, b in zip(results, results[1:]) if a.scores["bm25"] > b.scores["bm25"])
    assert results[0].scores["share"] == results[0].score  # the top still reads its share of the query


@pytest.fixture
def embedded_notes(notes, ollama, settings):
    from indexing.services.embedding import embed_pending

    settings.PMD_CHUNK_TOKENS = 200
    embed_pending()
    return ollama


@pytest.mark.django_db(transaction=True)
def test_hybrid_top_score_is_its_evidence_not_one(embedded_notes):
    weak = hybrid_search(
        SearchRequest(
            query="how do I make installs deterministic",
            mode=Mode.HYBRID,
            expand=False,
            rerank=False,
            explain=True,
            limit=5,
            access=Access.local_user(),
        )
    )
    top = weak.results[0]
    assert top.score < 0.5 and top.score < 1.0
    f = top.explain["fusion"]
    assert top.score == pytest.approx(
        f["w_keyword"] * top.explain["evidence"].get("keyword", 0)
        + f["w_vector"] * top.explain["evidence"].get("vector", 0),
        abs=1e-3,
    )
    strong = hybrid_search(
        SearchRequest(
            query="reproducible CI lockfile",
            mode=Mode.HYBRID,
            expand=False,
            rerank=False,
            limit=5,
            access=Access.local_user(),
        )
    )
    assert strong.results[0].path == "ci.md" and strong.results[0].score > top.score


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("query", ["make", "reproducible CI lockfile", "how do I make installs deterministic"])
def test_hybrid_and_vector_scores_fall_with_the_order(embedded_notes, query):
    for mode in (Mode.HYBRID, Mode.VECTOR):
        request = SearchRequest(
            query=query, mode=mode, expand=False, rerank=False, limit=10, access=Access.local_user()
        )
        response = hybrid_search(request) if mode == Mode.HYBRID else _vector(request)
        scores = [r.score for r in response.results]
        assert len(scores) >= 2 and scores == sorted(scores, reverse=True), (mode, query, scores)


def _vector(request):
    from search.retrieval.vector import vector_search

    return vector_search(request)
