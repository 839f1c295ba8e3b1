"""Result feedback: thumbs up/down on a result, stored with the search log entry,
from the web UI and the API, shown on the Searches page; only on one's own searches."""

from __future__ import annotations

import pytest

from indexing.access import Access
from indexing.models import SearchFeedback, SearchLogEntry
from indexing.selectors import search_log_report
from tests.support.factories import api_client, make_user, make_vault, web_client

NOTES = {"a.md": "# Alpha\n\npostgres vacuum tuning\n", "b.md": "# Beta\n\ngardening tomatoes\n"}


@pytest.fixture
def vault(db, tmp_path):
    return make_vault(tmp_path / "v", NOTES, name="fb")


def test_thumbs_on_a_result_are_kept_with_the_search_and_only_by_the_searcher(vault):
    ana, bo, boss = make_user("ana"), make_user("bo"), make_user("boss", staff=True)
    web = web_client(ana)
    page = web.get("/", {"q": "vacuum"}).content.decode()
    sid = SearchLogEntry.objects.get(query="vacuum").pk
    assert 'action="/feedback/"' in page and f'name="sid" value="{sid}"' in page
    vote = {"sid": sid, "uri": "pmd://fb/a.md", "helpful": "0"}
    fragment = web.post("/feedback/", vote, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and 'aria-pressed="true"' in fragment.content.decode()
    assert web.post("/feedback/", {**vote, "helpful": "1"}).status_code == 302  # no JS: back to the page
    assert list(SearchFeedback.objects.values_list("uri", "helpful")) == [("pmd://fb/a.md", True)]  # last vote counts

    # another member can neither rate ana's search nor see it
    assert web_client(bo).post("/feedback/", vote, HTTP_HX_REQUEST="true").status_code == 404
    api = api_client(bo)  # a rating is a change: a write token
    assert api.post(
        f"/api/searches/{sid}/feedback", {"uri": "pmd://fb/a.md", "helpful": False}, content_type="application/json"
    ).json() == {"recorded": False}
    assert SearchFeedback.objects.get().helpful is True
    assert search_log_report(access=Access.for_user(bo), days=7)["feedback"] == []

    # the API, on one's own search
    answer = api.post("/api/search", {"query": "tomatoes"}, content_type="application/json").json()
    assert api.post(
        f"/api/searches/{answer['search_id']}/feedback",
        {"uri": "pmd://fb/b.md", "helpful": False},
        content_type="application/json",
    ).json() == {"recorded": True}

    rows = search_log_report(access=Access.for_user(boss), days=7)["feedback"]
    assert [(r["query"], r["uri"], r["up"], r["down"]) for r in rows] == [
        ("tomatoes", "pmd://fb/b.md", 0, 1),
        ("vacuum", "pmd://fb/a.md", 1, 0),
    ]
    staff_page = web_client(boss).get("/status/searches/").content.decode()
    assert "Result feedback" in staff_page and "pmd://fb/b.md" in staff_page
    assert "pmd://fb/a.md" not in web_client(bo).get("/status/searches/").content.decode()
