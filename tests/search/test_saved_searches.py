"""Saved searches: save, list, run (with what is new since the last run), remove,
private or shared with a group; a member never sees another member's private ones."""

from __future__ import annotations

import json

import pytest

from tests.support.factories import api_client, make_group, make_user, make_vault, web_client, write_notes

NOTES = {"a.md": "---\ntags: [db]\n---\n# A\n\npostgres vacuum\n", "b.md": "# B\n\npostgres replication\n"}


@pytest.fixture
def vault(db, tmp_path):
    return make_vault(tmp_path / "v", NOTES, name="saved")


def test_cli_add_list_run_new_since_last_run_and_rm(vault, run_cli, tmp_path):
    assert run_cli("saved", "add", "pg", "postgres", "tag:db")[0] == 0
    code, out, err = run_cli("saved", "add", "pg", "other")
    assert code != 0 and "already have a saved search named 'pg'" in err
    code, out, err = run_cli("saved", "list", "--json")
    assert [s["name"] for s in json.loads(out)["saved"]] == ["pg"]
    code, out, err = run_cli("saved", "run", "pg", "--json")
    first = json.loads(out)
    assert [r["uri"] for r in first["results"]] == ["pmd://saved/a.md"] and first["new"] == ["pmd://saved/a.md"]
    write_notes(tmp_path / "v", {"c.md": "---\ntags: [db]\n---\n# C\n\npostgres indexes\n"})
    from indexing.models import Collection
    from indexing.services.scanning import collection_index

    collection_index(Collection.objects.get(name="saved"))
    code, out, err = run_cli("saved", "run", "pg")
    assert "1 new since the last run: pmd://saved/c.md" in " ".join(out.split())
    assert run_cli("saved", "rm", "pg")[0] == 0
    code, out, err = run_cli("saved", "run", "pg")
    assert code != 0 and "no saved search named 'pg'" in err and "pmd saved list" in err


def test_api_private_and_shared_saved_searches(vault):
    ana, bo, cy = make_user("ana"), make_user("bo"), make_user("cy")
    make_group("team", ana, bo)
    as_ana, as_bo, as_cy = api_client(ana), api_client(bo), api_client(cy)
    mine = as_ana.post("/api/saved", {"name": "mine", "query": "postgres"}, content_type="application/json")
    assert mine.status_code == 201, mine.content
    shared = as_ana.post(
        "/api/saved", {"name": "ours", "query": "vacuum", "group": "team"}, content_type="application/json"
    )
    assert shared.status_code == 201 and shared.json()["shared_with"] == "team"
    assert (
        as_cy.post(
            "/api/saved", {"name": "x", "query": "q", "group": "team"}, content_type="application/json"
        ).status_code
        == 404
    )  # not cy's group
    assert [s["name"] for s in as_ana.get("/api/saved").json()["saved"]] == ["mine", "ours"]
    assert [s["name"] for s in as_bo.get("/api/saved").json()["saved"]] == ["ours"]  # never ana's private one
    assert as_cy.get("/api/saved").json()["saved"] == []
    assert as_bo.post("/api/saved/mine/run").status_code == 404
    ran = as_bo.post("/api/saved/ours/run").json()
    assert [r["uri"] for r in ran["results"]] == ["pmd://saved/a.md"] and ran["new"] == ["pmd://saved/a.md"]
    assert as_bo.delete("/api/saved/ours").status_code == 404  # only the owner removes it
    assert as_ana.delete("/api/saved/ours").status_code == 204
    assert as_bo.get("/api/saved").json()["saved"] == []


def test_web_save_list_run_and_remove(vault):
    from tests.support.factories import web_client

    ana, bo = make_user("ana"), make_user("bo")
    client = web_client(ana)
    results = client.get("/", {"q": "postgres tag:db"}).content.decode()
    assert "Save this search" in results
    assert (
        client.post("/saved/add/", {"name": "db notes", "q": "postgres tag:db", "mode": "keyword"}).status_code == 302
    )
    listing = client.get("/saved/").content.decode()
    assert "db notes" in listing and "Remove" in listing
    ran = client.get("/saved/db notes/").content.decode()
    assert "1 new" in ran and "a.md" in ran
    assert "0 new" in client.get("/saved/db notes/").content.decode()
    assert "db notes" not in web_client(bo).get("/saved/").content.decode()  # ana's, private
    assert web_client(bo).get("/saved/db notes/").status_code == 302  # not found: back to the list
    client.post("/saved/db notes/remove/")
    assert "No saved searches yet" in client.get("/saved/").content.decode()


def test_the_digest_is_changed_by_its_owner_from_every_face(vault, run_cli, settings, monkeypatch):
    """Where a saved search sends its new matches: set and cleared from the web, the API and the CLI,
    only by its owner, and a private address refused (unless allowed) whatever the face."""
    from indexing.models import SavedSearch
    from tests.support.factories import web_client
    from tests.support.resolver import resolve_as

    settings.PMD_DIGEST_PRIVATE_WEBHOOKS = False
    resolve_as(monkeypatch, {"hooks.example.org": "93.184.215.14"})  # public; nothing is sent here
    ana, bo = make_user("ana"), make_user("bo")
    make_group("team", ana, bo)
    client = web_client(ana)
    client.post("/saved/add/", {"name": "db", "q": "postgres", "mode": "keyword"})
    listing = client.get("/saved/").content.decode()
    assert 'name="webhook_url"' in listing and "no email server set up" in listing
    client.post("/saved/db/digest/", {"webhook_url": "https://hooks.example.org/x", "email_digest": "on"})
    saved = SavedSearch.objects.get(name="db")
    assert (saved.webhook_url, saved.email_digest) == ("https://hooks.example.org/x", True)
    refused = client.post("/saved/db/digest/", {"webhook_url": "http://127.0.0.1:8000/x"}, follow=True)
    assert "private or loopback" in refused.content.decode()
    assert SavedSearch.objects.get(name="db").webhook_url == "https://hooks.example.org/x"  # nothing lost

    as_ana, as_bo = api_client(ana), api_client(bo)
    as_ana.post("/api/saved", {"name": "ours", "query": "vacuum", "group": "team"}, content_type="application/json")
    assert (
        as_bo.patch(
            "/api/saved/ours", {"webhook_url": "https://evil.example.org/"}, content_type="application/json"
        ).status_code
        == 404
    )  # shared with bo, still ana's
    changed = as_ana.patch("/api/saved/ours", {"email_digest": True}, content_type="application/json")
    assert changed.status_code == 200 and changed.json()["email_digest"] is True and changed.json()["webhook_url"] == ""
    assert (
        as_ana.patch(
            "/api/saved/ours", {"webhook_url": "http://10.0.0.5/"}, content_type="application/json"
        ).status_code
        == 422
    )
    as_ana.patch(
        "/api/saved/ours", {"webhook_url": "https://hooks.example.org/secret-token"}, content_type="application/json"
    )
    theirs = {s["name"]: s for s in as_bo.get("/api/saved").json()["saved"]}
    assert theirs["ours"]["webhook_url"] == "" and theirs["ours"]["mine"] is False  # a webhook often holds a secret
    assert {s["name"]: s for s in as_ana.get("/api/saved").json()["saved"]}["ours"]["webhook_url"].endswith(
        "secret-token"
    )
    assert "secret-token" not in web_client(bo).get("/saved/").content.decode()

    assert run_cli("saved", "add", "mine", "postgres")[0] == 0
    code, out, _ = run_cli("saved", "digest", "mine", "--webhook", "https://hooks.example.org/y", "--email", "on")
    assert code == 0 and "hooks.example.org/y, email" in out
    code, out, _ = run_cli("saved", "digest", "mine", "--webhook", "", "--email", "off")
    assert code == 0 and "nowhere" in out
    assert run_cli("saved", "digest", "nope", "--email", "on")[0] != 0


@pytest.mark.parametrize("name", ["break/page", "bell\x07", ".", ".."])
def test_a_name_with_a_slash_or_a_control_character_is_refused_in_clear_words(vault, name):
    """A name is part of its pages' and the API's addresses: one that cannot be in them is refused."""
    from indexing.models import SavedSearch

    refused = api_client(make_user("ana")).post(
        "/api/saved", {"name": name, "query": "postgres"}, content_type="application/json"
    )
    assert refused.status_code == 422, refused.content
    assert "without '/' or control characters" in refused.json()["message"]
    assert not SavedSearch.objects.exists()


def test_web_refuses_a_name_with_a_slash_and_the_page_still_works(vault):
    ana = make_user("ana")
    make_group("team", ana)
    client = web_client(ana)
    answer = client.post(
        "/saved/add/", {"name": "break/page", "q": "postgres", "mode": "keyword", "group": "team"}, follow=True
    )
    assert answer.status_code == 200 and "without &#x27;/&#x27; or control characters" in answer.content.decode()
    assert "No saved searches yet" in answer.content.decode()


def test_a_name_saved_with_a_slash_before_names_were_checked_can_be_listed_run_and_removed(vault):
    """Every member of its group sees the list; its owner runs and removes it, from the API and the
    browser."""
    from indexing.models import SavedSearch

    ana, bo = make_user("ana"), make_user("bo")
    team = make_group("team", ana, bo)
    for name in ("break/page", "also/bad"):
        SavedSearch.objects.create(owner=ana, name=name, query="vacuum", group=team)
    for member in (ana, bo):
        page = web_client(member).get("/saved/")
        assert page.status_code == 200 and "break/page" in page.content.decode()
    ran = web_client(bo).get("/saved/break/page/")
    assert ran.status_code == 200 and "a.md" in ran.content.decode()
    as_ana = api_client(ana)
    ran = as_ana.post("/api/saved/break%2Fpage/run")
    assert ran.status_code == 200 and [r["uri"] for r in ran.json()["results"]] == ["pmd://saved/a.md"]
    assert (
        as_ana.patch("/api/saved/break/page", {"email_digest": True}, content_type="application/json").status_code
        == 200
    )
    assert as_ana.delete("/api/saved/break%2Fpage").status_code == 204
    web_client(ana).post("/saved/also/bad/remove/")
    assert not SavedSearch.objects.exists()


def test_a_shared_saved_search_shows_members_only_the_collections_they_see(vault, tmp_path, run_cli):
    ana, bo = make_user("ana"), make_user("bo")
    make_group("team", ana, bo)
    make_vault(tmp_path / "h", {"h.md": "# H\n\npostgres hidden\n"}, name="hidden-one", owner=ana, visibility="private")
    made = api_client(ana).post(
        "/api/saved",
        {"name": "ours", "query": "postgres", "group": "team", "collections": ["saved", "hidden-one"]},
        content_type="application/json",
    )
    assert made.json()["collections"] == ["saved", "hidden-one"]
    assert api_client(ana).get("/api/saved").json()["saved"][0]["collections"] == ["saved", "hidden-one"]
    theirs = api_client(bo).get("/api/saved")
    assert theirs.json()["saved"][0]["collections"] == ["saved"] and "hidden-one" not in theirs.content.decode()
    assert "hidden-one" not in web_client(bo).get("/saved/").content.decode()
    code, out, _ = run_cli("saved", "list", "--json")  # the local user sees every collection
    assert code == 0 and json.loads(out)["saved"][0]["collections"] == ["saved", "hidden-one"]
