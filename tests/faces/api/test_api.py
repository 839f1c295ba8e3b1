"""The JSON API: every endpoint's happy path, and 401/403/404/422 behaviour."""

from __future__ import annotations

import pytest
from django.test import Client

from indexing.access import Access
from indexing.services.tokens import token_create, token_revoke
from tests.support.factories import api_client, make_user


@pytest.fixture
def staff(django_user_model):
    return make_user("root", staff=True)


@pytest.fixture
def reader(django_user_model):
    return make_user("reader")


def _client(user) -> Client:
    return api_client(user)


@pytest.fixture(autouse=True)
def _jobs_run_inline(eager_tasks):
    """Every test here sees its jobs finished (the `eager_tasks` fixture in conftest)."""


@pytest.fixture
def admin_api(staff):
    return _client(staff)


@pytest.fixture
def api(reader):
    return _client(reader)


def test_anonymous_and_bad_tokens_get_401(db, reader):
    anon = Client()
    for method, url in [
        ("get", "/api/status"),
        ("get", "/api/collections"),
        ("post", "/api/search"),
        ("get", "/api/get?ref=x"),
        ("delete", "/api/collections/x"),
    ]:
        response = getattr(anon, method)(url)
        assert response.status_code == 401, url
        assert "Bearer" in response.json()["message"]
        assert response["WWW-Authenticate"].startswith("Bearer")
    created = token_create(user=reader, access=Access.local_user(), can_write=True)
    assert Client(HTTP_AUTHORIZATION="Bearer pmd_wrong").get("/api/status").status_code == 401
    assert Client(HTTP_AUTHORIZATION=f"Bearer {created.raw}").get("/api/status").status_code == 200
    token_revoke(token=created.token.pk, access=Access.local_user())
    revoked = Client(HTTP_AUTHORIZATION=f"Bearer {created.raw}").get("/api/status")
    assert revoked.status_code == 401 and "revoked" in revoked.json()["message"]


def test_session_auth_requires_csrf_for_unsafe_methods(staff, indexed_collection):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(staff)
    assert browser.get("/api/collections").status_code == 200
    refused = browser.post("/api/collections/notes/reindex")
    assert refused.status_code == 403 and "CSRF" in refused.json()["message"]
    browser.get("/api/status")  # any page; the token comes from the csrftoken cookie
    from django.middleware.csrf import _get_new_csrf_string

    secret = _get_new_csrf_string()
    browser.cookies["csrftoken"] = secret
    accepted = browser.post("/api/collections/notes/reindex", HTTP_X_CSRFTOKEN=secret)
    assert accepted.status_code == 202, accepted.content


def test_status(api, indexed_collection):
    body = api.get("/api/status").json()
    assert body["database"]["ok"] is True
    assert body["index"]["documents"] == indexed_collection.documents.filter(active=True).count()
    only = api.get("/api/status?section=index").json()
    assert list(only) == ["index"]


def test_get_document_by_path_uri_docid_and_line_range(api, indexed_collection):
    doc = indexed_collection.documents.filter(active=True).order_by("path").first()
    by_uri = api.get("/api/get", {"ref": f"pmd://notes/{doc.path}"})
    assert by_uri.status_code == 200
    body = by_uri.json()
    assert body["docid"] == doc.docid and body["uri"] == f"pmd://notes/{doc.path}"
    assert "\n".join(body["lines"]) == "\n".join(doc.content.body.splitlines())
    by_docid = api.get("/api/get", {"ref": f"#{doc.docid}", "from_line": 2, "max_lines": 1}).json()
    assert by_docid["from_line"] == 2 and by_docid["lines"] == doc.content.body.splitlines()[1:2]
    assert api.get("/api/get", {"ref": doc.path}).json()["docid"] == doc.docid


def test_get_past_the_last_line_is_the_typed_error(api, indexed_collection):
    """`note.md:99` past the end is an error on every face, as `pmd get` says it."""
    response = api.get("/api/get", {"ref": "pmd://notes/guides/postgres-tuning.md:9999"})
    assert response.status_code == 416
    body = response.json()
    assert body["code"] == "line_past_end" and "line 9999 is past its end" in body["message"]
    assert "416" in api.get("/api/openapi.json").json()["paths"]["/api/get"]["get"]["responses"]


def test_get_unknown_document_is_404_with_suggestions(api, indexed_collection):
    doc = indexed_collection.documents.filter(active=True).order_by("path").first()
    typo = doc.path[:-4] + "x.md"
    response = api.get("/api/get", {"ref": f"pmd://notes/{typo}"})
    assert response.status_code == 404
    body = response.json()
    assert typo in body["message"] and f"pmd://notes/{doc.path}" in body["suggestions"]
    wrong_collection = api.get("/api/get", {"ref": "pmd://nots/a.md"})
    assert wrong_collection.status_code == 404 and wrong_collection.json()["suggestions"] == ["pmd://notes/"]
    assert api.get("/api/get", {"ref": "#ffffff"}).status_code == 404


def test_multi_get_glob_and_list(api, indexed_collection):
    docs = list(indexed_collection.documents.filter(active=True).order_by("path"))
    body = api.get("/api/multi-get", {"pattern": "notes/**", "max_bytes": 1_000_000}).json()
    assert sorted(d["uri"] for d in body["documents"]) == sorted(d.uri for d in docs)
    listed = api.get("/api/multi-get", {"pattern": f"#{docs[0].docid},missing.md"}).json()
    assert [d["docid"] for d in listed["documents"]] == [docs[0].docid]
    assert listed["missing"] == ["missing.md"]
    small = api.get("/api/multi-get", {"pattern": "notes/**", "max_bytes": 1}).json()
    assert all(d["skipped"] and d["text"] is None for d in small["documents"])


def test_validation_errors_are_422(api, indexed_collection):
    for response in [
        api.get("/api/get"),
        api.get("/api/get", {"ref": "x", "from_line": 0}),
        api.post("/api/search", {"query": ""}, content_type="application/json"),
        api.post("/api/search", {"query": "x", "limit": 0}, content_type="application/json"),
        api.post("/api/search", {"query": "x", "mode": "psychic"}, content_type="application/json"),
    ]:
        assert response.status_code == 422, response.content
        assert response.json()["message"].startswith("invalid request")
    malformed = api.post("/api/search", "not json", content_type="application/json")
    assert malformed.status_code == 400 and "Cannot parse" in malformed.json()["message"]


@pytest.mark.parametrize(
    ("method", "path", "body", "message"),
    [
        (
            "post",
            "/api/search",
            {"q": "x", "collection": "notes"},
            "unknown field 'collection' (did you mean 'collections'?)",
        ),
        ("post", "/api/query", {"query": "x", "limt": 3}, "unknown field 'limt' (did you mean 'limit'?)"),
        (
            "post",
            "/api/search",
            {"query": "x", "filters": {"tag": "db"}},
            "filters: unknown field 'tag' (did you mean 'tags'?)",
        ),
        (
            "post",
            "/api/ask",
            {"question": "x", "colections": ["notes"]},
            "unknown field 'colections' (did you mean 'collections'?)",
        ),
        (
            "post",
            "/api/collections",
            {"path": "/tmp", "format": ["pdf"]},
            "unknown field 'format' (did you mean 'formats'?)",
        ),
        ("patch", "/api/collections/notes", {"nmae": "x"}, "unknown field 'nmae' (did you mean 'name'?)"),
        (
            "put",
            "/api/collections/notes/sharing",
            {"visibility": "everyone", "user": ["a"]},
            "unknown field 'user' (did you mean 'users'?)",
        ),
        ("put", "/api/contexts", {"target": "pmd://notes/", "text": "x", "zzz": 1}, "unknown field 'zzz'"),
        ("post", "/api/saved", {"name": "n", "query": "x", "colour": "red"}, "unknown field 'colour'"),
    ],
)
def test_unknown_body_fields_are_422_naming_the_nearest_known_field(
    admin_api, indexed_collection, method, path, body, message
):
    response = getattr(admin_api, method)(path, body, content_type="application/json")
    assert response.status_code == 422, response.content
    assert response.json()["code"] == "invalid_input"
    assert response.json()["message"] == f"invalid request: {message}"


def test_every_json_body_the_api_reads_refuses_unknown_fields():
    """Every route, present and future: a body schema that is not strict would drop a misspelt field."""
    from pmd_site.api import api as ninja_api

    schema = ninja_api.get_openapi_schema()
    components = schema["components"]["schemas"]
    lenient = []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if not body:
                continue
            ref = body["schema"].get("$ref", "")
            model = components[ref.rsplit("/", 1)[-1]] if ref else body["schema"]
            if model.get("additionalProperties") is not False:
                lenient.append(f"{method.upper()} {path}")
    assert not lenient
    assert any("/notes" in path for path in schema["paths"])  # the check sees the write routes


def test_known_body_fields_by_name_or_alias_are_accepted(api, indexed_collection):
    assert (
        api.post("/api/search", {"query": "x", "collections": ["notes"]}, content_type="application/json").status_code
        == 200
    )
    assert api.get("/api/search", {"q": "x", "collection": "notes"}).status_code == 200


def test_collections_list_detail_and_pagination(api, indexed_collection, tmp_path):
    from indexing.services.collections import collection_create

    for i in range(3):
        (tmp_path / f"c{i}").mkdir()
        collection_create(path=tmp_path / f"c{i}", name=f"extra{i}")
    page = api.get("/api/collections", {"limit": 2, "offset": 1}).json()
    assert page["count"] == 4 and [c["name"] for c in page["items"]] == ["extra1", "extra2"]
    detail = api.get("/api/collections/notes").json()
    assert detail["documents"] == indexed_collection.documents.filter(active=True).count()
    missing = api.get("/api/collections/note")
    assert missing.status_code == 404 and "pmd://notes/" in missing.json()["suggestions"]


def test_non_staff_cannot_manage_collections_or_contexts(api, indexed_collection, tmp_path):
    attempts = [
        api.post("/api/collections", {"path": str(tmp_path)}, content_type="application/json"),
        api.patch("/api/collections/notes", {"name": "x"}, content_type="application/json"),
        api.delete("/api/collections/notes"),
        api.post("/api/collections/notes/reindex"),
        api.post("/api/collections/notes/embed"),
        api.put("/api/contexts", {"target": "/", "text": "t"}, content_type="application/json"),
        api.delete("/api/contexts?target=/"),
    ]
    assert [r.status_code for r in attempts] == [403] * len(attempts)
    assert "staff" in attempts[0].json()["message"]


def test_staff_collection_lifecycle_and_job(admin_api, corpus_dir, db, settings):
    settings.PMD_COLLECTION_ROOTS = [corpus_dir.parent]  # the API adds collections only under these
    created = admin_api.post(
        "/api/collections", {"path": str(corpus_dir), "name": "kb"}, content_type="application/json"
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["collection"]["documents"] > 0 and body["job"]["state"] == "done"
    job = admin_api.get(f"/api/jobs/{body['job']['id']}").json()
    assert job["kind"] == "index" and job["percent"] == 100 and job["collection"] == "kb"
    jobs = admin_api.get("/api/jobs", {"state": "done"}).json()
    assert body["job"]["id"] in {j["id"] for j in jobs["items"]} and jobs["count"] == len(jobs["items"])
    assert admin_api.get("/api/jobs/00000000-0000-0000-0000-000000000000").status_code == 404
    duplicate = admin_api.post(
        "/api/collections", {"path": str(corpus_dir), "name": "kb"}, content_type="application/json"
    )
    assert duplicate.status_code == 409
    missing_folder = admin_api.post(
        "/api/collections", {"path": str(corpus_dir / "nope")}, content_type="application/json"
    )
    # The answer of every folder staff may not use: it tells no one which folders exist.
    assert missing_folder.status_code == 400 and "choose an existing folder" in missing_folder.json()["message"]

    (corpus_dir / "fresh.md").write_text("# Fresh\n\nA new note.\n")
    reindexed = admin_api.post("/api/collections/kb/reindex")
    assert reindexed.status_code == 202 and reindexed.json()["result"]["added"] == 1

    renamed = admin_api.patch("/api/collections/kb", {"name": "kb2"}, content_type="application/json")
    assert renamed.status_code == 200 and renamed.json()["name"] == "kb2"
    assert admin_api.patch("/api/collections/kb", {"name": "x"}, content_type="application/json").status_code == 404
    deleted = admin_api.delete("/api/collections/kb2")
    assert deleted.status_code == 200 and deleted.json()["documents"] > 0
    assert admin_api.get("/api/collections").json()["count"] == 0


def test_contexts_crud(admin_api, indexed_collection):
    put = admin_api.put(
        "/api/contexts", {"target": "pmd://notes/", "text": "Team notes"}, content_type="application/json"
    )
    assert put.status_code == 200 and put.json() == {"target": "pmd://notes/", "text": "Team notes"}
    admin_api.put("/api/contexts", {"target": "/", "text": "Everything"}, content_type="application/json")
    listed = admin_api.get("/api/contexts").json()
    assert listed["count"] == 2 and {c["text"] for c in listed["items"]} == {"Team notes", "Everything"}
    doc = indexed_collection.documents.filter(active=True).first()
    assert admin_api.get("/api/get", {"ref": doc.uri}).json()["context"] == ["Everything", "Team notes"]
    assert admin_api.delete("/api/contexts?target=pmd://notes/").status_code == 200
    assert admin_api.delete("/api/contexts?target=pmd://notes/").status_code == 404
    unknown = admin_api.put("/api/contexts", {"target": "pmd://nope/", "text": "x"}, content_type="application/json")
    assert unknown.status_code == 404


def test_openapi_schema_and_docs(api, db):
    schema = api.get("/api/openapi.json").json()
    for route in [
        "/api/search",
        "/api/get",
        "/api/multi-get",
        "/api/collections",
        "/api/collections/{name}/embed",
        "/api/jobs/{job_id}",
        "/api/contexts",
        "/api/status",
    ]:
        assert route in schema["paths"], route
    assert api.get("/api/docs").status_code == 200


RESULT_KEYS = {
    "docid",
    "uri",
    "collection",
    "path",
    "title",
    "score",
    "line",
    "snippet",
    "highlights",
    "context",
    "scores",
}


def test_keyword_search_get_and_post_match_the_cli_json(api, indexed_collection, run_cli):
    code, out, err = run_cli("search", "vector", "index", "--json")
    assert code == 0, err
    import json

    cli = json.loads(out)
    posted = api.post("/api/search", {"query": "vector index"}, content_type="application/json")
    assert posted.status_code == 200, posted.content
    body = posted.json()
    assert body["mode"] == "search" and body["results"]
    assert set(body) == set(cli) | {"search_id"}  # the API's answer names its search-log entry too
    assert RESULT_KEYS <= set(body["results"][0])
    assert [r["docid"] for r in body["results"]] == [r["docid"] for r in cli["results"]]
    got = api.get("/api/search", {"q": "vector index", "limit": 1, "collection": "notes"}).json()
    assert [r["docid"] for r in got["results"]] == [cli["results"][0]["docid"]]
    assert api.get("/api/search", {"q": "zzzqqq"}).json()["results"] == []


def test_search_unknown_collection_is_404_with_suggestions(api, indexed_collection):
    response = api.post("/api/search", {"query": "x", "collections": ["note"]}, content_type="application/json")
    assert response.status_code == 404
    assert response.json()["suggestions"] == ["pmd://notes/"]


def test_embed_job_then_semantic_and_hybrid_search(admin_api, indexed_collection, ollama):
    embedded = admin_api.post("/api/collections/notes/embed")
    assert embedded.status_code == 202, embedded.content
    job = admin_api.get(f"/api/jobs/{embedded.json()['id']}").json()
    assert job["kind"] == "embed" and job["state"] == "done", job
    semantic = admin_api.post("/api/vsearch", {"query": "tuning the database"}, content_type="application/json")
    assert semantic.status_code == 200, semantic.content
    assert semantic.json()["mode"] == "vsearch" and semantic.json()["results"]
    hybrid = admin_api.post(
        "/api/query",
        {"query": "tuning the database", "rerank": False, "expand": False},
        content_type="application/json",
    )
    assert hybrid.status_code == 200, hybrid.content
    assert hybrid.json()["mode"] == "query" and hybrid.json()["results"]


def test_semantic_search_before_embedding_says_what_to_do(api, indexed_collection, ollama):
    response = api.post("/api/vsearch", {"query": "tuning"}, content_type="application/json")
    body = response.json()
    assert response.status_code == 422 and body["code"] == "not_embedded"
    assert "POST /api/collections/<name>/embed" in body["message"] and "pmd embed" not in body["message"]
