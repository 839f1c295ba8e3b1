"""Keyword search against the real Postgres index built by the scan service."""

import pytest

from indexing.access import Access
from indexing.errors import CollectionNotFound
from search.request import SearchRequest
from search.retrieval.keyword import keyword_search


def search(query, **kw):
    return keyword_search(SearchRequest(query=query, **kw, access=Access.local_user()))


def paths(response):
    return [r.path for r in response.results]


@pytest.fixture
def ranked_collection(db, tmp_path):
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    root = tmp_path / "kb"
    root.mkdir()
    filler = "\n".join(f"Common note {i} about the project and the team." for i in range(3))
    for i in range(8):
        (root / f"common{i}.md").write_text(f"# Note {i}\n\nThe project plan is shared.\n{filler}\n")
    (root / "rare.md").write_text("# Zeppelin\n\nThe project mentions a zeppelin hangar once.\n")
    (root / "plain.md").write_text("# Plain\n\nA project about the plan and more project project words.\n")
    (root / "phrase.md").write_text("# Ordering\n\nWe compare the index rollout with the rollout of the index.\n")
    (root / "code.md").write_text("# Code\n\nsnake_case_helper is called by parseHttpRequest in C++ code.\n")
    collection = collection_create(path=root, name="kb")
    collection_index(collection)
    return collection


def test_rarer_term_outranks_common_terms(ranked_collection):
    response = search("project zeppelin")
    assert paths(response)[0] == "rare.md"
    assert "project" in {r.snippet.lower().split()[0] for r in response.results} or len(response.results) > 1


def test_plain_query_is_disjunctive(ranked_collection):
    # Nothing contains both words, yet both documents are found.
    got = paths(search("zeppelin parseHttpRequest", limit=10))
    assert {"rare.md", "code.md"} <= set(got)


def test_scores_are_normalised_and_not_all_equal(ranked_collection):
    response = search("project zeppelin", limit=10)
    scores = [r.score for r in response.results]
    assert all(0.0 < s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > scores[-1]


def test_quoted_phrase_is_required(ranked_collection):
    got = paths(search('"index rollout"', limit=10))
    assert got == ["phrase.md"]
    assert search('"rollout plan"', limit=10).results == []


def test_negation_excludes(ranked_collection):
    got = paths(search("project -zeppelin", limit=20))
    assert "rare.md" not in got and "plain.md" in got


def test_prefix(ranked_collection):
    assert "rare.md" in paths(search("zeppe*", limit=10))


@pytest.mark.parametrize(
    "query,expected",
    [
        ("parseHttpRequest", "code.md"),
        ("snake_case_helper", "code.md"),
        ("C++", "code.md"),
    ],
)
def test_identifiers_are_findable(ranked_collection, query, expected):
    assert paths(search(query))[0] == expected


@pytest.mark.parametrize(
    "query", ['"unclosed', "foo & | !(bar", "*", "-", ":*", "'\\", "the of and", "((()))", "a" * 3000]
)
def test_malformed_queries_never_error(ranked_collection, query):
    response = search(query)
    assert isinstance(response.results, list)


def test_min_score_and_limit(ranked_collection):
    assert len(search("project", limit=3).results) == 3
    everything = search("project", all=True).results
    assert len(everything) >= 10
    # shown scores are the share of the query a passage holds: only rare.md holds both words
    both = search("project zeppelin", all=True).results
    high = search("project zeppelin", all=True, min_score=both[0].score).results
    assert all(r.score >= both[0].score for r in high) and 0 < len(high) < len(both)


def test_snippet_highlight_and_line(ranked_collection):
    hit = search("zeppelin hangar").results[0]
    assert hit.path == "rare.md"
    assert hit.line == 3  # the body line, not the heading
    marked = [hit.snippet[s:e].lower() for s, e in hit.highlights]
    assert "zeppelin" in marked and "hangar" in marked


def test_unicode_and_cjk_hits(indexed_collection):
    for query in ("Zürich", "café", "東京", "検索エンジン", "日本語"):
        response = search(query)
        assert paths(response)[0] == "meetings/2025-01-standup.md", query
    hit = search("東京").results[0]
    assert hit.line == 8 and hit.highlights


def test_collection_filter(ranked_collection, indexed_collection):
    assert set(r.collection for r in search("project", collections=["kb"], all=True).results) == {"kb"}
    assert search("zeppelin", collections=["notes"]).results == []
    with pytest.raises(CollectionNotFound):
        search("x", collections=["nope"])


def test_several_hits_per_document(db, tmp_path):
    from indexing.services.collections import collection_create
    from indexing.services.scanning import collection_index

    root = tmp_path / "multi"
    root.mkdir()
    (root / "long.md").write_text("# Long\n\nalpha marmot here\n\n" + "filler line\n" * 20 + "\nsecond marmot there\n")
    collection_index(collection_create(path=root, name="multi"))
    results = search("marmot", hits_per_document=3).results
    assert [r.path for r in results] == ["long.md", "long.md"]
    assert results[0].line != results[1].line


def test_index_follows_changes_and_removals(ranked_collection):
    from indexing.services.scanning import collection_index

    root = ranked_collection.root_path
    import pathlib

    (pathlib.Path(root) / "rare.md").unlink()
    (pathlib.Path(root) / "new.md").write_text("# New\n\nA quokka appeared.\n")
    collection_index(ranked_collection)
    assert search("zeppelin").results == []
    assert paths(search("quokka")) == ["new.md"]


def test_collection_removal_and_rename(ranked_collection):
    from django.db import connection

    from indexing.services.collections import collection_remove, collection_rename

    collection_rename(name="kb", new_name="kb2", access=Access.local_user())
    assert search("zeppelin").results[0].collection == "kb2"
    collection_remove(name="kb2", access=Access.local_user())
    assert search("zeppelin").results == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM search_keyword_term WHERE lexeme = 'zeppelin'")
        assert cursor.fetchone()[0] == 0
        cursor.execute("SELECT count(*) FROM search_keyword_stats")  # the collection's statistics went with it
        assert cursor.fetchone()[0] == 0


def test_full_body_and_context(ranked_collection):
    from indexing.models import PathContext

    PathContext.objects.create(collection=ranked_collection, path_prefix="", text="Knowledge base")
    hit = search("zeppelin", full=True).results[0]
    assert hit.body.startswith("# Zeppelin") and hit.context == ["Knowledge base"]


def test_cli_search_formats(ranked_collection, run_cli):
    code, out, err = run_cli("search", "zeppelin", "--files")
    assert code == 0 and out.startswith("#") and "pmd://kb/rare.md" in out
    code, out, err = run_cli("search", "zeppelin", "hangar", "--line-numbers")
    assert code == 0 and "pmd://kb/rare.md:3" in out and "3  " in out
    code, out, err = run_cli("search", "x", "-c", "missing")
    assert code == 1 and "no collection named 'missing'" in err


def _index_snapshot():
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT lexeme, df FROM search_keyword_term ORDER BY lexeme")
        terms = cursor.fetchall()
        cursor.execute(
            "SELECT p.document_id, s.ordinal, p.lexeme, p.tf_title, p.tf_body, p.length"
            " FROM search_keyword_posting p JOIN search_keyword_passage s ON s.id = p.passage_id"
            " ORDER BY 1, 2, 3"
        )
        postings = cursor.fetchall()
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'search_keyword_posting' ORDER BY 1")
        indexes = [r[0] for r in cursor.fetchall()]
    return terms, postings, indexes


def test_bulk_load_into_empty_index_matches_incremental(ranked_collection, monkeypatch):
    """The first-index fast paths (btrees rebuilt after the load, analysis on a second connection) give
    the same index."""
    from indexing.keyword import keyword_index

    incremental = _index_snapshot()
    keyword_index.keyword_index_rebuild()  # below BULK_MIN: row-by-row btree inserts
    assert _index_snapshot() == incremental
    monkeypatch.setattr(keyword_index, "BULK_MIN", 1)
    keyword_index.keyword_index_rebuild()  # empty index, enough documents: bulk path
    assert _index_snapshot() == incremental
    monkeypatch.setattr(keyword_index, "BATCH", 3)
    keyword_index.keyword_index_rebuild()  # several batches: analysed on a second connection
    assert _index_snapshot() == incremental
    assert incremental[2] == ["search_keyword_posting_lexeme", "search_keyword_posting_pkey"]
    assert paths(search("project zeppelin"))[0] == "rare.md"
