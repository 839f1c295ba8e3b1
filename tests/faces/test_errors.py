"""Typed errors (indexing.errors): each face maps a service's PmdError once, by its status, code and data."""

from __future__ import annotations

import pytest
from django.test import Client

from indexing import errors
from indexing.access import Access
from indexing.services.tokens import token_create
from tests.support.factories import api_client, make_user


@pytest.fixture
def staff(django_user_model):
    return make_user("root", staff=True)


@pytest.fixture
def admin_api(staff):
    return api_client(staff)


def test_service_errors_carry_code_status_and_their_data():
    from indexing.errors import (
        CollectionExists,
        CollectionNotFound,
        DocumentNotFound,
        LLMBackendError,
        LLMBackendUnavailable,
        NotEmbedded,
    )

    missing = CollectionNotFound(name="kb", suggestions=["pmd://notes/"])
    assert (missing.code, missing.http_status, missing.message) == (
        "collection_not_found",
        404,
        "no collection named 'kb'",
    )
    assert isinstance(missing, errors.NotFound) and missing.name == "kb"
    taken = CollectionExists(name="kb")
    assert (taken.code, taken.http_status) == ("collection_exists", 409) and "--name" not in str(taken)
    unembedded = NotEmbedded("nothing is embedded with m yet", model="m")
    assert (unembedded.code, unembedded.http_status, unembedded.model) == ("not_embedded", 422, "m")
    assert isinstance(unembedded, errors.InvalidSearchInput)
    down = LLMBackendUnavailable("http://127.0.0.1:9")
    assert isinstance(down, LLMBackendError) and isinstance(down, RuntimeError)
    assert (down.code, down.http_status) == ("llm_backend_unavailable", 503)
    assert DocumentNotFound("no document x").http_status == 404


def test_api_maps_errors_with_status_code_and_suggestions(admin_api, indexed_collection, corpus_dir, settings):
    missing = admin_api.get("/api/collections/note")
    assert missing.status_code == 404
    assert missing.json() == {
        "message": "no collection named 'note'",
        "suggestions": ["pmd://notes/"],
        "code": "collection_not_found",
    }
    settings.PMD_COLLECTION_ROOTS = [corpus_dir.parent]
    (corpus_dir.parent / "other").mkdir()
    duplicate = admin_api.post(
        "/api/collections", {"path": str(corpus_dir.parent / "other"), "name": "notes"}, content_type="application/json"
    )
    body = duplicate.json()
    assert duplicate.status_code == 409 and body["code"] == "collection_exists"
    # Remote faces: the same words whether or not the caller sees the collection holding the name.
    assert body["message"] == "the collection name 'notes' is not available: choose another"
    searched = admin_api.post("/api/search", {"query": "x", "collections": ["note"]}, content_type="application/json")
    assert searched.status_code == 404 and searched.json()["code"] == "collection_not_found"
    context = admin_api.delete("/api/contexts?target=pmd://notes/nowhere")
    assert context.status_code == 404 and context.json()["code"] == "context_not_found"


def test_cli_prints_message_its_own_hint_and_suggestions(run_cli, indexed_collection, corpus_dir):
    (corpus_dir.parent / "other").mkdir()
    code, _, err = run_cli("collection", "add", str(corpus_dir.parent / "other"), "--name", "notes", "--no-index")
    assert code == 1 and "a collection named 'notes' already exists" in err
    assert "choose another with --name" in err  # the CLI's hint, not the service's message
    code, _, err = run_cli("collection", "show", "note")
    assert code == 1 and "no collection named 'note'" in err and "pmd://notes/" in err


def test_mcp_turns_a_service_error_into_a_tool_error(indexed_collection, monkeypatch):
    import django.db
    from mcp.server.mcpserver.exceptions import ToolError

    from indexing.errors import LLMBackendUnavailable
    from pmd_site.mcp.errors import tool_call

    monkeypatch.setattr(django.db, "close_old_connections", lambda: None)  # keep the test's transaction

    def missing():
        from indexing.services.collections import collection_get

        collection_get("note")

    with pytest.raises(ToolError) as info:
        tool_call(missing)()
    assert str(info.value) == "no collection named 'note'. Did you mean: pmd://notes/?"

    def down():
        raise LLMBackendUnavailable("http://127.0.0.1:9")

    with pytest.raises(ToolError, match="^the model backend is not available: Ollama is not reachable"):
        tool_call(down)()


def test_web_maps_errors_to_the_page_and_status(db, staff, indexed_collection, corpus_dir, settings):
    from indexing.errors import CollectionNotFound, LLMModelMissing, NotEmbedded
    from pmd_site.web.errors import problem_for

    assert problem_for(NotEmbedded("nothing is embedded yet"), search=True).kind == "no-embeddings"
    assert problem_for(LLMModelMissing("m"), search=True).title == "The embedding model is not available"
    assert problem_for(CollectionNotFound(name="x"), search=True).kind == "invalid"
    assert problem_for(RuntimeError("boom"), search=True).kind == "error"
    settings.PMD_COLLECTION_ROOTS = [corpus_dir.parent]
    client = Client()
    client.force_login(staff)
    (corpus_dir.parent / "other").mkdir()
    page = client.post("/collections/add/", {"path": str(corpus_dir.parent / "other"), "name": "notes"})
    assert page.status_code == 400 and "the collection name &#x27;notes&#x27; is not available" in page.content.decode()
    assert "--name" not in page.content.decode()


# --- the API's own errors carry a code too (pmd_site.api.errors) --------------------------------


def test_api_answers_401_403_422_with_a_stable_code(db, staff, django_user_model, indexed_collection):
    anonymous = Client().get("/api/status")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"] == (
        'Bearer realm="pmd", resource_metadata="http://testserver/.well-known/oauth-protected-resource/api"'
    )
    assert anonymous.json() == {
        "message": "authentication required: send `Authorization: Bearer <token>` (pmd token create --user NAME)",
        "suggestions": [],
        "code": "unauthorized",
    }
    bad = Client(HTTP_AUTHORIZATION="Bearer pmd_nope").get("/api/status")
    assert bad.status_code == 401 and bad.json()["code"] == "unauthorized"
    assert bad.json()["message"] == "invalid, expired or revoked API token"

    member = make_user("member")
    member_api = api_client(member)
    refused = member_api.post("/api/collections/notes/reindex")
    assert refused.status_code == 403
    assert refused.json() == {
        "message": "managing collections and contexts needs a staff account",
        "suggestions": [],
        "code": "forbidden",
    }
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(staff)
    csrf = browser.post("/api/collections/notes/reindex")
    assert csrf.status_code == 403 and csrf.json()["code"] == "forbidden" and "CSRF" in csrf.json()["message"]

    invalid = member_api.post("/api/search", {"query": "x", "limit": 0}, content_type="application/json")
    body = invalid.json()
    assert invalid.status_code == 422 and body["code"] == "invalid_input"
    assert body["message"].startswith("invalid request: limit:") and body["errors"]
    empty = member_api.post("/api/search", {"query": "   "}, content_type="application/json")
    assert empty.status_code == 422 and empty.json() == {
        "message": "empty query: a search needs words or a filter",
        "suggestions": [],
        "code": "empty_query",
    }


def test_api_answers_a_path_that_names_nothing_with_a_json_404(db, staff):
    api = api_client(make_user("member"))
    unknown = api.get("/api/no-such-resource")
    assert unknown.status_code == 404 and unknown["Content-Type"].startswith("application/json")
    assert unknown.json() == {"message": "nothing at /api/no-such-resource", "suggestions": [], "code": "not_found"}
    assert api.get("/api/collections/a/b/c/more").json()["code"] == "not_found"
    assert Client().get("/api/no-such-resource").status_code == 404  # whoever asks: no sign-in needed to learn that


def test_api_answers_a_conversation_id_that_is_no_id_as_one_that_does_not_exist(db):
    api = api_client(make_user("member"))
    absent = api.delete("/api/answers/00000000-0000-0000-0000-000000000000")
    malformed = api.delete("/api/answers/not-a-uuid")
    assert (absent.status_code, absent.json()["code"]) == (404, "conversation_not_found")
    assert malformed.status_code == 404 and malformed.json() == {
        "message": "no conversation not-a-uuid of yours",
        "suggestions": [],
        "code": "conversation_not_found",
    }


def test_api_answers_a_method_a_path_does_not_have_with_a_json_405(db):
    refused = api_client(make_user("member")).put("/api/search", {}, content_type="application/json")
    assert refused.status_code == 405 and refused["Content-Type"].startswith("application/json")
    assert refused.json()["code"] == "method_not_allowed" and "PUT is not allowed" in refused.json()["message"]
    assert set(refused["Allow"].split(", ")) == {"GET", "POST"}


def test_api_answers_a_body_over_the_upload_limit_with_a_json_413_and_no_traceback(db, settings, caplog):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    member = make_user("member")
    browser = Client()  # a session: its CSRF check reads a form body before any endpoint does
    browser.force_login(member)
    answers = [
        api_client(member).post("/api/search", {"query": "x" * 2000}, content_type="application/json"),
        api_client(member).post("/api/search", {"query": "x" * 2000}),
        browser.post("/api/search", {"query": "x" * 2000}),
    ]
    for answer in answers:
        assert answer.status_code == 413 and answer.json() == {
            "message": "the request body is over the 1000 bytes the server accepts",
            "suggestions": [],
            "code": "too_large",
        }
    assert not [r for r in caplog.records if r.exc_info or r.name.startswith("django.security")]


def test_token_throttled_is_a_pmd_error_the_api_answers_429_with_retry_after(db, staff, settings):
    from indexing.services.throttling import TokenThrottled

    throttled = TokenThrottled(0)
    assert isinstance(throttled, errors.PmdError)
    assert (throttled.code, throttled.http_status, throttled.retry_after) == ("throttled", 429, 1)
    assert str(throttled) == "too many failed API token attempts from your address: retry in 1 s"

    settings.PMD_TOKEN_FAILURE_LIMIT = 2
    good = token_create(user=staff, access=Access.local_user(), can_write=True).raw
    for _ in range(2):
        assert (
            Client(REMOTE_ADDR="192.0.2.44", HTTP_AUTHORIZATION="Bearer pmd_wrong").get("/api/status").status_code
            == 401
        )
    blocked = Client(REMOTE_ADDR="192.0.2.44", HTTP_AUTHORIZATION=f"Bearer {good}").get("/api/status")
    assert blocked.status_code == 429 and int(blocked["Retry-After"]) > 0
    body = blocked.json()
    assert body["code"] == "throttled" and body["suggestions"] == []
    assert body["message"].startswith("too many failed API token attempts from your address: retry in ")


def test_openapi_declares_only_the_statuses_a_route_can_answer(db, admin_api):
    schema = admin_api.get("/api/openapi.json").json()
    embed = schema["paths"]["/api/collections/{name}/embed"]["post"]
    assert sorted(embed["responses"]) == ["202", "403", "404"]  # the job runs elsewhere: no 503 from the request
    assert embed["operationId"] == "search_api_endpoints_collection_embed"  # ids as published
