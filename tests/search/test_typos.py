"""Typos: a query word no searched note holds is corrected from the collections'
own words when the query as written finds nothing strong; clean queries are never touched."""

from __future__ import annotations

import pytest

from indexing.access import Access
from search.request import Mode, SearchRequest
from search.retrieval.spelling import query_correction
from tests.support.factories import make_vault
from tests.support.mcp_client import SERVED_DB

NOTES = {
    "diabetes.md": "# Diabetes care\n\nInsulin resistance and diabetes in older patients.\n",
    "vaccines.md": "# Vaccination\n\nMeasles vaccination schedules for children.\n",
    "postgres.md": "# Postgres vacuum\n\nAutovacuum tuning for large tables.\n",
    "other.md": "# Other\n\nRandom words about gardening and tomatoes.\n",
}


@pytest.fixture
def vault(db, tmp_path):
    return make_vault(tmp_path / "v", NOTES, name="notes")


def run(query: str, mode=Mode.KEYWORD, **kwargs):
    from search.pipeline.dispatch import search_run

    return search_run(SearchRequest(query=query, mode=mode, access=Access.local_user(), limit=10, **kwargs))


def test_a_misspelt_word_is_corrected_to_a_word_the_notes_use(vault):
    correction = query_correction("diabtes insulin", collection_ids=[vault.id])
    assert correction.text == "diabetes insulin"  # the surface word, not the stem `diabet`
    assert correction.words == [("diabtes", "diabetes")]
    assert query_correction("vaccinaton", collection_ids=[vault.id]).text == "vaccination"  # deletion
    assert query_correction("autovacuum tomatoes", collection_ids=[vault.id]) is None  # every word is indexed
    assert query_correction("zzzzqqqq", collection_ids=[vault.id]) is None  # nothing close
    assert query_correction("diabtes", collection_ids=[]) is None  # nothing visible: nothing to learn from


def test_names_and_acronyms_in_mixed_case_are_not_corrected(vault):
    """ComYMV, aPKCz, dLNs: a capital after the first letter marks a name the notes may lack (SciFact's
    own queries hold such words, and "correcting" them lost relevant hits); a capitalised word is not one."""
    assert query_correction("Diabtes insulin", collection_ids=[vault.id]).words[0][0] == "Diabtes"
    assert query_correction("DiaBtes insulin", collection_ids=[vault.id]) is None
    assert query_correction("dIABTES", collection_ids=[vault.id]) is None


def test_keyword_search_retries_with_the_correction_and_says_so(vault):
    response = run("diabtes")
    assert [r.path for r in response.results][:1] == ["diabetes.md"]
    assert response.corrected_query == "diabetes"
    assert response.query == "diabtes"
    assert response.as_dict()["corrected_query"] == "diabetes"
    exact = run("diabtes", correct=False)  # "search instead for diabtes"
    assert exact.corrected_query is None and not exact.results


def test_filters_stay_in_the_corrected_query(vault):
    response = run("vacuum tabels path:postgres.md")
    assert response.corrected_query == "vacuum tables path:postgres.md"


def test_a_strong_answer_is_not_corrected(vault):
    clean = run("measles vaccination")
    assert clean.corrected_query is None and clean.results[0].path == "vaccines.md"
    assert clean.as_dict()["corrected_query"] is None


def test_correction_can_be_turned_off(vault, settings):
    settings.PMD_TYPO_CORRECTION = False
    assert run("diabtes").corrected_query is None


# --- every face says "showing results for … / search instead for …" -------------------------------


@SERVED_DB
def test_every_face_shows_the_correction_and_searches_as_written_on_request(request, tmp_path, run_cli):
    import json

    from tests.support.factories import api_client, make_user, web_client
    from tests.support.mcp_client import call_tool, close_other_connections

    request.addfinalizer(close_other_connections)  # the MCP tools ran in worker threads
    make_vault(tmp_path / "v", NOTES, name="notes")
    code, out, err = run_cli("search", "diabtes", "--json")
    assert code == 0 and json.loads(out)["corrected_query"] == "diabetes"
    code, out, err = run_cli("search", "diabtes")
    assert "showing results for diabetes" in " ".join(err.split()) and "--exact" in err and "diabetes.md" in out
    code, out, err = run_cli("search", "diabtes", "--exact", "--json")
    assert json.loads(out)["corrected_query"] is None and not json.loads(out)["results"]

    user = make_user("reader")
    api = api_client(user, write=False)
    answer = api.post("/api/search", {"query": "diabtes"}, content_type="application/json").json()
    assert answer["corrected_query"] == "diabetes" and answer["results"][0]["uri"].endswith("diabetes.md")
    exact = api.get("/api/search", {"q": "diabtes", "correct": "false"}).json()
    assert exact["corrected_query"] is None and exact["results"] == []

    page = web_client(user).get("/", {"q": "diabtes"}).content.decode()
    assert "Showing results for" in page and "<strong>diabetes</strong>" in page and "exact=1" in page
    instead = web_client(user).get("/", {"q": "diabtes", "exact": "1"}).content.decode()
    assert "Showing results for" not in instead

    mcp = call_tool("pmd_search", {"query": "diabtes"})
    assert mcp["corrected_query"] == "diabetes" and mcp["results"]
    assert call_tool("pmd_search", {"query": "diabtes", "exact": True})["corrected_query"] is None


def test_a_correction_fits_the_other_words_of_the_query_not_only_the_most_frequent(db, tmp_path):
    """`ctied` is one edit from both `cities` (frequent here) and `cited`: next to `papers` it is `cited`."""
    notes = {f"city{i}.md": f"# Town {i}\n\nLarge cities and their parks.\n" for i in range(6)}
    notes["papers.md"] = "# Citations\n\nThe papers cited most often.\n"
    collection = make_vault(tmp_path / "c", notes, name="cities")
    assert query_correction("papers ctied", collection_ids=[collection.id]).text == "papers cited"
    assert query_correction("parks ctied", collection_ids=[collection.id]).text == "parks cities"


def test_the_likelier_slip_wins_between_equally_fitting_words():
    from search.retrieval.spelling import _neighbours, _one_edit

    edits = _one_edit("form")
    assert edits["from"] == "transposition" and edits["dorm"] == "neighbour" and edits["norm"] == "substitution"
    assert edits["fom"] == "deletion" and edits["forms"] == "insertion"
    assert _neighbours("s", "d") and _neighbours("g", "b") and not _neighbours("q", "p")
