"""Typed errors (indexing.errors): each face maps a service's PmdError once, by its status, code and data."""

from __future__ import annotations

import pytest
from django.test import Client

from indexing import errors
from indexing.services.collections import CollectionError, collection_create
from search.api_tokens import token_create


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user("root", password="pw-root-123", is_staff=True)


@pytest.fixture
def admin_api(staff):
    return Client(HTTP_AUTHORIZATION=f"Bearer {token_create(user=staff).raw}")


def test_service_errors_carry_code_status_and_stay_catchable_as_before():
    from indexing.selectors import DocumentNotFound
    from indexing.services.collections import CollectionExists, CollectionNotFound
    from search.llm.base import BackendError, BackendUnavailable
    from search.retrieval.common import SearchCollectionNotFound, SearchError
    from search.retrieval.vector import NotEmbedded

    missing = CollectionNotFound(name="kb", suggestions=["pmd://notes/"])
    assert (missing.code, missing.http_status, missing.message) == ("collection_not_found", 404, "no collection named 'kb'")
    assert isinstance(missing, CollectionError) and isinstance(missing, errors.CollectionNotFound)
    taken = CollectionExists(name="kb")
    assert (taken.code, taken.http_status) == ("collection_exists", 409) and "--name" not in str(taken)
    search_missing = SearchCollectionNotFound(name="x")
    assert isinstance(search_missing, SearchError) and search_missing.http_status == 404
    assert (NotEmbedded("run `pmd embed`").code, NotEmbedded("x").http_status) == ("not_embedded", 422)
    down = BackendUnavailable("http://127.0.0.1:9")
    assert isinstance(down, BackendError) and isinstance(down, RuntimeError)
    assert (down.code, down.http_status) == ("llm_backend_unavailable", 503)
    assert DocumentNotFound("no document x").http_status == 404


def test_api_maps_errors_with_status_code_and_suggestions(admin_api, indexed_collection, corpus_dir, settings):
    missing = admin_api.get("/api/collections/note")
    assert missing.status_code == 404
    assert missing.json() == {"message": "no collection named 'note'", "suggestions": ["pmd://notes/"],
                              "code": "collection_not_found"}
    settings.PMD_COLLECTION_ROOTS = [corpus_dir.parent]
    duplicate = admin_api.post("/api/collections", {"path": str(corpus_dir), "name": "notes"},
                               content_type="application/json")
    body = duplicate.json()
    assert duplicate.status_code == 409 and body["code"] == "collection_exists"
    assert body["message"] == "a collection named 'notes' already exists" and "--name" not in body["message"]
    searched = admin_api.post("/api/search", {"query": "x", "collections": ["note"]}, content_type="application/json")
    assert searched.status_code == 404 and searched.json()["code"] == "collection_not_found"
    context = admin_api.delete("/api/contexts?target=pmd://notes/nowhere")
    assert context.status_code == 404 and context.json()["code"] == "context_not_found"


def test_cli_prints_message_its_own_hint_and_suggestions(run_cli, indexed_collection, corpus_dir):
    code, _, err = run_cli("collection", "add", str(corpus_dir), "--name", "notes", "--no-index")
    assert code == 1 and "a collection named 'notes' already exists" in err
    assert "choose another with --name" in err  # the CLI's hint, not the service's message
    code, _, err = run_cli("collection", "show", "note")
    assert code == 1 and "no collection named 'note'" in err and "pmd://notes/" in err


def test_mcp_turns_a_service_error_into_a_tool_error(indexed_collection, monkeypatch):
    import django.db
    from mcp.server.mcpserver.exceptions import ToolError

    from search.llm.base import BackendUnavailable
    from search.mcp.server import _orm

    monkeypatch.setattr(django.db, "close_old_connections", lambda: None)  # keep the test's transaction
    def missing():
        from indexing.services.collections import collection_get

        collection_get("note")

    with pytest.raises(ToolError) as info:
        _orm(missing)()
    assert str(info.value) == "no collection named 'note'. Did you mean: pmd://notes/?"

    def down():
        raise BackendUnavailable("http://127.0.0.1:9")

    with pytest.raises(ToolError, match="^the model backend is not available: Ollama is not reachable"):
        _orm(down)()


def test_web_maps_errors_to_the_page_and_status(db, staff, indexed_collection, corpus_dir, settings):
    from search.llm.base import ModelMissing
    from search.retrieval.common import SearchCollectionNotFound
    from search.retrieval.vector import NotEmbedded
    from search.web.errors import problem_for

    assert problem_for(NotEmbedded("nothing is embedded yet"), search=True).kind == "no-embeddings"
    assert problem_for(ModelMissing("m"), search=True).title == "The embedding model is not available"
    assert problem_for(SearchCollectionNotFound(name="x"), search=True).kind == "invalid"
    assert problem_for(RuntimeError("boom"), search=True).kind == "error"
    settings.PMD_COLLECTION_ROOTS = [corpus_dir.parent]
    client = Client()
    client.force_login(staff)
    page = client.post("/collections/add/", {"path": str(corpus_dir), "name": "notes"})
    assert page.status_code == 400 and "a collection named &#x27;notes&#x27; already exists" in page.content.decode()
    assert "--name" not in page.content.decode()
