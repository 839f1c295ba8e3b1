"""Typos (issue 31, item 1): a query word no searched note holds is corrected from the collections'
own words when the query as written finds nothing strong; clean queries are never touched."""

from __future__ import annotations

import pytest

from indexing.access import Access
from search.request import Mode, SearchRequest
from search.retrieval.spelling import query_correction
from tests.support.factories import make_vault

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
    assert "corrected_query" not in clean.as_dict()


def test_correction_can_be_turned_off(vault, settings):
    settings.PMD_TYPO_CORRECTION = False
    assert run("diabtes").corrected_query is None
