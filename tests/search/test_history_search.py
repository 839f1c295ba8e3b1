"""History search through every face (CLI in every format, /api/history, MCP pmd_search_history, the
web UI's History page), its filters, vector and hybrid search, and access control: a member who may
not see a collection sees none of its commits, and naming it is answered as a name never created."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET

import httpx
import pytest
from django.test import Client

from indexing.access import Access
from tests.support.factories import api_client, make_user
from tests.support.history_repo import build_notes_repo, commit, git
from tests.support.mcp_client import SERVED_DB, close_other_connections, serve_asgi

SECRET_WORD = "zanzibarquux"


def _world(tmp_path, django_user_model):
    """`handbook` (everyone) from the notes repository; `hr-secret` (private to its owner) from a repository
    whose only commit holds SECRET_WORD. Returns (shas of handbook, member, owner)."""
    from indexing.models import Collection
    from indexing.services.refresh import collection_add

    shas = build_notes_repo(tmp_path / "handbook")
    secret = tmp_path / "secret"
    secret.mkdir()
    git(secret, "init", "-q", "-b", "main")
    (secret / "salaries.md").write_text("# Salaries\n\nbands\n")
    commit(secret, f"Update the {SECRET_WORD} salary bands of the on-call rota", date="2025-03-02T09:00:00+00:00")
    owner = make_user("owner")
    member = make_user("member")
    collection_add(path=tmp_path / "handbook", name="handbook", access=Access.local_user())
    added = collection_add(
        path=secret, name="hr-secret", access=Access.local_user(), visibility=Collection.Visibility.PRIVATE
    )
    Collection.objects.filter(pk=added.collection.pk).update(owner=owner)
    return shas, member, owner


@pytest.fixture
def world(tmp_path, django_user_model):
    return _world(tmp_path, django_user_model)


def _search(**fields):
    from search.pipeline.history import history_search
    from search.retrieval.history import HistoryRequest

    return history_search(HistoryRequest(access=fields.pop("access", Access.local_user()), **fields))


@pytest.mark.django_db
def test_author_matches_whole_names_not_pieces_of_them(world):
    """`author=Ana` matched "Sadika Sumanapala"."""

    def authors(author):
        return {h.author for h in _search(query="", author=author, limit=50).results}

    assert authors("bob") == authors("Stone") == authors("bob@example.org") == authors("BOB  stone") == {"Bob Stone"}
    assert authors("alice martin") == {"Alice Martin"}
    assert authors("ob") == authors("tone") == authors("lice") == set()


@pytest.mark.django_db
def test_keyword_search_and_filters(world):
    shas, member, _ = world
    found = _search(query="on-call rota weekends", mode="keyword")
    assert found.results[0].sha == shas["change"]
    assert found.results[0].files[0].docid  # oncall.md still exists: linked as it is now
    assert [h.sha for h in _search(query="", author="bob", collections=["handbook"], limit=50).results] == [
        shas["delete"],
        shas["merge"],
        shas["topic"],
        shas["change"],
    ]
    renamed = _search(query="", paths=["deploy.md"], limit=50).results  # the old name of a rename counts
    assert {h.sha for h in renamed} == {shas["add"], shas["rename"]}
    assert {h.sha for h in _search(query="", paths=["guides/**"]).results} == {shas["rename"]}
    dated = _search(query="", after="2025-03", before="2025-04", collections=["handbook"], limit=50).results
    assert {h.sha for h in dated} == {shas["rename"], shas["topic"], shas["scratch"], shas["merge"]}
    gone = _search(query="scratch", mode="keyword").results
    deleted = next(h for h in gone if h.sha == shas["delete"])
    assert deleted.files[0].docid is None  # the note no longer exists
    assert _search(query="failover postmortem", mode="keyword", diff=True).results[0].diff.startswith("diff --git")
    assert 0 < found.results[0].score <= 1


@pytest.mark.django_db
def test_a_member_sees_no_commit_of_a_collection_hidden_from_them(world):
    from indexing.errors import CollectionNotFound

    _, member, owner = world
    assert _search(query=SECRET_WORD, mode="keyword").results  # the local user sees it
    assert _search(query=SECRET_WORD, mode="keyword", access=Access.for_user(owner)).results
    assert _search(query=SECRET_WORD, mode="keyword", access=Access.for_user(member)).results == []
    listed = _search(query="", access=Access.for_user(member), limit=100).results
    assert listed and all(h.collection == "handbook" for h in listed)
    with pytest.raises(CollectionNotFound) as hidden:
        _search(query="rota", collections=["hr-secret"], access=Access.for_user(member))
    with pytest.raises(CollectionNotFound) as never:
        _search(query="rota", collections=["hr-secrex"], access=Access.for_user(member))
    assert str(hidden.value).replace("hr-secret", "NAME") == str(never.value).replace("hr-secrex", "NAME")


@pytest.mark.django_db
def test_cli_formats(world, run_cli):
    shas, _, _ = world
    code, out, err = run_cli("history", "on-call", "rota", "--json", "-c", "handbook")
    assert code == 0, err
    data = json.loads(out)
    assert data["results"][0]["sha"] == shas["change"] and "diff" not in data["results"][0]
    code, out, _ = run_cli("history", "rota", "--author", "bob", "--csv", "--diff")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows[0]["sha"] == shas["change"] and "+Bob covers weekends" in rows[0]["diff"]
    code, out, _ = run_cli("history", "rota", "--md", "--diff")
    assert "## Change the on-call rota: Bob takes weekends" in out and "```diff" in out
    code, out, _ = run_cli("history", "rota", "--xml")
    root = ET.fromstring(out)
    assert root.find("commit").get("sha") == data["results"][0]["sha"]
    code, out, _ = run_cli("history", "rota", "--files")
    assert "pmd://handbook/oncall.md" in out and "scratch.md" not in out
    code, out, _ = run_cli("history", "weekends", "--diff")
    assert code == 0 and shas["change"][:10] in out and "oncall.md" in out
    code, _, err = run_cli("history", "--path", "guides/**", "--after", "2025-02", "--before", "2025-04")
    assert code == 0
    assert run_cli("history")[0] == 1  # nothing to search
    assert run_cli("history", "x", "--after", "soon")[0] == 1  # an unreadable date


@pytest.mark.django_db
def test_xml_stays_well_formed_with_control_characters_in_a_commit(tmp_path, run_cli):
    """A message or diff may hold characters XML 1.0 forbids (an escape, a form feed): dropped."""
    from indexing.services.refresh import collection_add

    repo = tmp_path / "ctl"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "term.md").write_text("# Terminal\n\ncolours \x1b[31mred\x1b[0m\n")
    commit(repo, "Colour codes \x1b[31min\x0c the terminal note", date="2025-05-01T09:00:00+00:00")
    collection_add(path=repo, name="ctl", access=Access.local_user())
    code, out, err = run_cli("history", "colour", "--xml", "--diff", "-c", "ctl")
    assert code == 0, err
    root = ET.fromstring(out)
    assert "Colour codes" in root.find("commit/title").text and "\x1b" not in out
    assert "red" in root.find("commit/diff").text


@pytest.mark.django_db
def test_api_and_web_for_a_member(world):

    shas, member, _ = world
    api = api_client(member, write=False)
    got = api.get("/api/history", {"q": "rota", "author": "bob", "diff": "true"})
    assert got.status_code == 200, got.content
    assert got.json()["results"][0]["sha"] == shas["change"] and "+Bob" in got.json()["results"][0]["diff"]
    secret = api.get("/api/history", {"q": SECRET_WORD})
    assert secret.status_code == 200 and SECRET_WORD not in secret.content.decode().replace(
        f'"query": "{SECRET_WORD}"', ""
    ).replace(f'"query":"{SECRET_WORD}"', "")
    assert secret.json()["results"] == []
    hidden = api.get("/api/history", {"q": "rota", "collection": "hr-secret"})
    never = api.get("/api/history", {"q": "rota", "collection": "hr-secrex"})
    assert hidden.status_code == never.status_code == 404
    assert hidden.content.decode().replace("hr-secret", "N") == never.content.decode().replace("hr-secrex", "N")
    assert api.get("/api/history", {"q": "x", "after": "soon"}).status_code == 422
    assert Client().get("/api/history", {"q": "rota"}).status_code == 401

    web = Client()
    web.force_login(member)
    page = web.get("/history/", {"q": "weekends"})
    assert page.status_code == 200
    html = page.content.decode()
    assert "Change the on-call rota" in html and "/doc/handbook/oncall.md" in html
    assert "+Bob covers weekends" in html  # the diff excerpt
    secret_page = web.get("/history/", {"q": SECRET_WORD}).content.decode()
    assert "No commits match." in secret_page and "salary bands" not in secret_page
    assert "hr-secret" not in web.get("/history/", {"q": "rota"}).content.decode()
    assert Client().get("/history/").status_code == 302  # sign in first


@pytest.mark.django_db
def test_web_history_page_searches_as_you_type_says_what_to_do_and_scores_only_words(world):
    """No search-as-you-type, a blank empty state, "0.00" scores for filter-only lists."""
    _, member, _ = world
    web = Client()
    web.force_login(member)
    empty = web.get("/history/").content.decode()
    assert "Search the git history of your collections" in empty and "meetings/**" in empty
    assert 'hx-trigger="keyup changed delay:300ms from:(#q, #history-path, #history-author)' in empty
    assert 'hx-select="#history-results"' in empty and 'id="history-results"' in empty
    listed = web.get("/history/", {"author": "bob"}).content.decode()
    assert "Bob Stone" in listed and 'class="score"' not in listed and "0.00" not in listed
    scored = web.get("/history/", {"q": "rota", "author": "bob"}).content.decode()
    assert 'class="score"' in scored
    fragment = web.get("/history/", {"q": "weekends"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'id="history-results"' in fragment and "Change the on-call rota" in fragment
    nothing = web.get("/history/", {"q": "rota", "author": "nobody-here"}).content.decode()
    assert "No commits match. Try fewer or other words" in nothing


@SERVED_DB
def test_mcp_over_http_with_tokens(request, tmp_path, django_user_model):
    """MCP as a member's token and as the owner's: the hidden commit only for the owner."""
    from indexing.services.tokens import token_create

    request.addfinalizer(close_other_connections)
    shas, member, owner = _world(tmp_path, django_user_model)
    with serve_asgi() as base_url:

        def call(user, **arguments):
            token = token_create(user=user, access=Access.local_user()).raw
            response = httpx.post(
                f"{base_url}/mcp",
                timeout=30,
                headers={
                    "Authorization": f"Bearer {token}",
                    "Accept": "application/json, text/event-stream",
                    "Content-Type": "application/json",
                    "MCP-Protocol-Version": "2025-06-18",
                },
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {"name": "pmd_search_history", "arguments": arguments},
                },
            )
            assert response.status_code == 200, response.text
            return response.json()["result"], response.text

        result, _ = call(member, query="weekends", author="bob", diff=True)
        hits = result["structuredContent"]["results"]
        assert hits[0]["sha"] == shas["change"] and "+Bob" in hits[0]["diff"]
        assert hits[0]["files"][0]["docid"]
        result, text = call(member, query=SECRET_WORD)
        assert result["structuredContent"]["results"] == [] and "hr-secret" not in text
        hidden, hidden_text = call(member, query="rota", collections=["hr-secret"])
        never, never_text = call(member, query="rota", collections=["hr-secrex"])
        assert hidden["isError"] and never["isError"]
        assert hidden_text.replace("hr-secret", "N") == never_text.replace("hr-secrex", "N")
        result, _ = call(owner, query=SECRET_WORD)
        assert result["structuredContent"]["results"][0]["collection"] == "hr-secret"


@pytest.mark.django_db
def test_vector_and_hybrid_search_embed_commits_like_notes(world, ollama, settings):
    from indexing.models import Commit, ContentEmbedding
    from indexing.services.embedding import embed_pending, fingerprint_configured, pending_contents

    settings.PMD_CHUNK_TOKENS = 60
    shas, member, _ = world
    before = _search(query="weekends rota")
    assert any("not embedded" in w for w in before.warnings)
    report = embed_pending()
    assert report.contents >= Commit.objects.count()
    fingerprint = fingerprint_configured()
    assert not pending_contents(fingerprint).exists()
    assert ContentEmbedding.objects.filter(content__commits__isnull=False).count() == Commit.objects.count()
    vector = _search(query="Bob takes weekends on the on-call rota", mode="vector", collections=["handbook"])
    assert vector.results and all(0 <= h.score <= 1 for h in vector.results)
    assert shas["change"] in [h.sha for h in vector.results[:3]]
    assert not any(
        h.collection == "hr-secret"
        for h in _search(query=f"{SECRET_WORD} salary", mode="vector", access=Access.for_user(member)).results
    )
    hybrid = _search(query="weekends rota")
    assert hybrid.warnings == [] and hybrid.results[0].sha == shas["change"]
    assert "cosine" in hybrid.results[0].scores
    filtered = _search(query="rota", mode="vector", author="alice")
    assert filtered.results and all(h.author.startswith("Alice") for h in filtered.results)


@pytest.mark.django_db
def test_hybrid_falls_back_to_keyword_when_the_backend_is_down(world, ollama, settings):
    from indexing.services.embedding import embed_pending
    from tests.support.ollama_fixtures import unused_url

    shas, _, _ = world
    embed_pending()
    settings.OLLAMA_URL = unused_url()
    settings.PMD_LLM_RETRIES = 0
    found = _search(query="a query never embedded before: weekends rota")
    assert found.results[0].sha == shas["change"]
    assert any("vector search unavailable" in w for w in found.warnings)


def test_git_ref_changes_wake_the_watcher(tmp_path):
    from pmd_site.watcher import WatchTarget, collections_for_changes

    notes = tmp_path / "notes"
    notes.mkdir()
    targets = [WatchTarget("notes", notes, "**/*.md")]
    for rel in (".git/HEAD", ".git/refs/heads/main", ".git/packed-refs"):
        assert collections_for_changes({(2, str(notes / rel))}, targets) == {"notes"}, rel
    for rel in (".git/index", ".git/objects/ab/cdef", ".git/HEAD.lock", ".git/logs/HEAD"):
        assert collections_for_changes({(2, str(notes / rel))}, targets) == set(), rel


@pytest.mark.django_db
def test_pmd_update_reads_new_commits_and_collection_show_says_so(world, run_cli, tmp_path):
    repo = tmp_path / "handbook"
    (repo / "oncall.md").write_text("# On-call rota\n\nCarol joins.\n")
    new = commit(repo, "Carol joins the on-call rota", date="2025-05-01T09:00:00+00:00")
    code, out, err = run_cli("update", "-c", "handbook")
    assert code == 0, err
    assert "history: 1 new commits" in out
    code, out, _ = run_cli("history", "carol", "--json")
    assert json.loads(out)["results"][0]["sha"] == new
    code, out, _ = run_cli("collection", "show", "handbook", "--json")
    assert json.loads(out)["history"]["commits"] == 10 and json.loads(out)["history"]["state"] == "indexed"
    code, out, _ = run_cli("collection", "show", "handbook")
    assert re.search(r"^history: indexed, 10 commits, read (now|\d+ s ago)$", out, re.M), out
