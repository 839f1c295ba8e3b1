"""The web box as people type: completions of filter keys, tags and values, and the last
word matching as a prefix while typing (keyword search)."""

from __future__ import annotations

import pytest

from indexing.access import Access
from search.pipeline.dispatch import search_run
from search.request import SearchRequest
from search.retrieval.suggest import query_suggestions
from tests.support.factories import make_user, make_vault, web_client

NOTES = {
    "a.md": "---\nstatus: draft\npriority: 2\ntags: [database, devops]\n---\n# Alpha\n\npostgres vacuum tuning\n",
    "b.md": "---\nstatus: done\ntags: [database]\n---\n# Beta\n\ndatabases and replication\n",
    "c.md": "---\nstatus: draft\n---\n# Gamma\n\ngardening tomatoes\n",
}


@pytest.fixture
def vault(db, tmp_path):
    return make_vault(tmp_path / "v", NOTES, name="sug")


def labels(text, **kwargs):
    return [s.label for s in query_suggestions(access=Access.local_user(), text=text, **kwargs)]


def test_keys_tags_and_values_are_offered_for_the_last_piece(vault):
    assert labels("vacuum st") == ["status:"]
    assert labels("pri") == ["priority:"]
    assert "tag:" in labels("ta")
    assert labels("vacuum tag:d") == ["tag:database", "tag:devops"]  # most used first
    assert labels("status:dr") == ["status:draft"]
    assert labels("-has:pri") == ["-has:priority"]
    found = query_suggestions(access=Access.local_user(), text="vacuum tag:dev")
    assert [s.text for s in found] == ["vacuum tag:devops"]  # the rest of the box stays
    assert labels("vacuum ") == [] and labels("") == []


def test_completions_come_only_from_notes_the_user_sees(vault, tmp_path):
    make_vault(
        tmp_path / "w",
        {"x.md": "---\ntags: [secretproject]\n---\n# X\n\nhidden\n"},
        name="private",
        visibility="private",
    )
    ana = make_user("ana")
    client = web_client(ana)
    assert [s["label"] for s in client.get("/suggest/", {"q": "tag:s"}).json()["suggestions"]] == []
    assert client.get("/suggest/", {"q": "tag:d"}).json()["suggestions"][0] == {
        "text": "tag:database",
        "label": "tag:database",
        "hint": "2 notes",
    }
    assert client.get("/suggest/", {"q": "tag:d", "collection": "private"}).json() == {"suggestions": []}


def test_the_word_being_typed_matches_as_a_prefix(vault):
    def titles(query, typing):
        response = search_run(SearchRequest(query=query, access=Access.local_user(), typing=typing, correct=False))
        return sorted(r.title for r in response.results)

    assert titles("repl", typing=False) == []
    assert titles("repl", typing=True) == ["Beta"]
    assert titles("gardening tomat", typing=True) == ["Gamma"]
    assert titles("replication", typing=True) == ["Beta"]  # a whole word stays a word (its stem matches)
    assert titles("repl ", typing=True) == []  # a space ends the word


def test_the_web_box_searches_as_you_type(vault):
    client = web_client(make_user("bo"))
    typed = client.get(
        "/", {"q": "repl"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="results", HTTP_HX_TRIGGER="q"
    ).content.decode()
    assert "Beta" in typed
    page = client.get("/", {"q": "vacuum"}).content.decode()
    assert 'data-suggest="/suggest/"' in page and 'id="suggestions"' in page
