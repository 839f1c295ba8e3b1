"""The search log: every face's searches are recorded; staff see the team's top,
zero-result, weak and slow queries; a member sees only their own; retention and off switch."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from indexing.access import Access
from indexing.models import SearchLogEntry
from indexing.selectors import search_log_report
from indexing.services.search_log import search_log_prune
from tests.support.factories import api_client, make_user, make_vault, web_client

NOTES = {"a.md": "# Alpha\n\npostgres vacuum tuning\n", "b.md": "# Beta\n\ngardening tomatoes\n"}


@pytest.fixture
def vault(db, tmp_path):
    return make_vault(tmp_path / "v", NOTES, name="log")


def test_every_face_is_logged_and_members_see_only_their_own(vault, run_cli, settings):
    ana, bo, boss = make_user("ana"), make_user("bo"), make_user("boss", staff=True)
    assert run_cli("search", "postgres")[0] == 0
    api = api_client(ana)  # noting what was opened is a change: a write token
    answer = api.post("/api/search", {"query": "quantum"}, content_type="application/json").json()
    assert answer["results"] == [] and answer["search_id"]
    page = web_client(bo).get("/", {"q": "tomatoes"})
    assert page.status_code == 200
    entries = {e.query: e for e in SearchLogEntry.objects.all()}
    assert {q: (e.face, e.user.username if e.user else None, e.results) for q, e in entries.items()} == {
        "postgres": ("cli", None, 1),
        "quantum": ("api", "ana", 0),
        "tomatoes": ("web", "bo", 1),
    }

    # the result opened, from the web results (sid) and through the API
    sid = entries["tomatoes"].pk
    assert f"sid={sid}" in page.content.decode()
    web_client(bo).get("/doc/log/b.md", {"sid": sid})
    assert SearchLogEntry.objects.get(pk=sid).opened_uri == "pmd://log/b.md"
    assert api.post(
        f"/api/searches/{sid}/opened", {"uri": "pmd://log/a.md"}, content_type="application/json"
    ).json() == {"recorded": False}  # not ana's search

    staff = search_log_report(access=Access.for_user(boss), days=7)
    assert staff["searches"] == 3 and staff["everyone"]
    assert [r["query"] for r in staff["zero_results"]] == ["quantum"]
    member = search_log_report(access=Access.for_user(ana), days=7)
    assert member["searches"] == 1 and [r["query"] for r in member["top"]] == ["quantum"]
    assert {r["query"] for r in api.get("/api/searches").json()["top"]} == {"quantum"}
    assert "tomatoes" not in web_client(ana).get("/status/searches/").content.decode()
    staff_page = web_client(boss).get("/status/searches/", {"days": 7}).content.decode()
    assert "No results" in staff_page and "quantum" in staff_page and "tomatoes" in staff_page

    code, out, err = run_cli("searches", "--json")  # the local user is staff
    assert code == 0 and json.loads(out)["searches"] >= 3
    code, out, err = run_cli("searches")
    assert "no results:" in out and "'quantum'" in out


def test_retention_and_off(vault, run_cli, settings):
    run_cli("search", "postgres")
    SearchLogEntry.objects.update(at=timezone.now() - timedelta(days=91))
    run_cli("search", "vacuum")
    assert search_log_prune() == 1 and SearchLogEntry.objects.count() == 1
    settings.PMD_SEARCH_LOG = False
    run_cli("search", "tomatoes")
    assert SearchLogEntry.objects.count() == 1


def test_typing_in_the_web_box_is_one_search_in_the_log(vault):
    """The box searches at each pause: "postg", "postgres", "postgres vac" are one entry, the last;
    a new query, another person, or a search whose result was opened start new ones."""
    bo, cy = make_user("bo"), make_user("cy")
    web = web_client(bo)
    for typed in ("postg", "postgres", "postgres vac", "postgres vacuum"):
        web.get("/", {"q": typed})
    web_client(cy).get("/", {"q": "postgres"})
    assert list(SearchLogEntry.objects.filter(user=bo).values_list("query", flat=True)) == ["postgres vacuum"]
    assert SearchLogEntry.objects.filter(user=cy).count() == 1
    opened = SearchLogEntry.objects.get(user=bo)
    web.get("/doc/log/a.md", {"sid": opened.pk})
    web.get("/", {"q": "postgres vacuum tuning"})  # after opening a result: a search of its own
    web.get("/", {"q": "tomatoes"})  # another query
    assert list(SearchLogEntry.objects.filter(user=bo).order_by("id").values_list("query", flat=True)) == [
        "postgres vacuum",
        "postgres vacuum tuning",
        "tomatoes",
    ]
