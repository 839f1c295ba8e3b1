"""One path per operation: every face that refreshes collections reaches `collections_refresh`
(one RefreshResult); accounts change through one audited service; a search with neither words
nor a filter is the one EmptyQuery of `search_run`, whichever face asks; a collection's detail
is `collection_detail`'s, whichever face shows it."""

from __future__ import annotations

import io
import json
import sys

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from indexing.access import Access
from indexing.errors import EmptyQuery
from indexing.models import AuditEvent, Job
from indexing.services.refresh import RefreshResult


def _spy(monkeypatch, module_path: str, name: str, modules: list[str]) -> list:
    """Wrap `module_path.name` wherever a face imported it; each call's result (or raised error) is recorded."""
    import importlib

    for module in modules:
        importlib.import_module(module)
    original = getattr(importlib.import_module(module_path), name)
    calls: list = []

    def spy(*args, **kwargs):
        try:
            result = original(*args, **kwargs)
        except Exception as exc:
            calls.append(exc)
            raise
        calls.append(result)
        return result

    for module in list(sys.modules.values()):
        for attribute, value in list(getattr(module, "__dict__", {}).items()):
            if value is original:  # under its own name or another (`as`)
                monkeypatch.setattr(module, attribute, spy)
    return calls


FACES = [
    "pmd_site.tasks",
    "pmd_site.watcher.loop",
    "pmd_site.api.collections",
    "pmd_site.web.views.collections",
    "pmd_site.admin.indexing",
    "pmd_site.cli.collections",
    "pmd_site.cli.up",
]


@pytest.fixture
def refreshes(monkeypatch):
    return _spy(monkeypatch, "indexing.services.refresh", "collections_refresh", FACES)


@pytest.fixture
def boss(db):
    return get_user_model().objects.create_user("boss", password="pw-boss-123", is_staff=True, is_superuser=True)


def _scanned(calls: list, name: str) -> bool:
    return any(isinstance(c, RefreshResult) and [r.collection for r in c.collections] == [name] for c in calls)


@pytest.mark.django_db
def test_every_face_reaches_the_one_refresh_service(indexed_collection, refreshes, run_cli, boss, eager_tasks, ollama):
    from indexing.services.tokens import token_create
    from pmd_site.tasks import reconcile
    from pmd_site.watcher.loop import _refresh

    name = indexed_collection.name
    seen: dict[str, list] = {}

    def face(label: str, run) -> None:
        refreshes.clear()
        run()
        seen[label] = list(refreshes)

    face("cli", lambda: run_cli("update"))
    face("watcher", lambda: _refresh([name], {}))
    face("beat", reconcile)
    api = Client(
        HTTP_AUTHORIZATION="Bearer " + token_create(user=boss, name="t", access=Access.local_user(), can_write=True).raw
    )
    face("api", lambda: api.post(f"/api/collections/{name}/reindex"))
    browser = Client()
    browser.force_login(boss)
    face("web", lambda: browser.post(f"/collections/{name}/reindex/"))
    face(
        "admin",
        lambda: browser.post(
            "/admin/indexing/collection/", {"action": "reindex", "_selected_action": [indexed_collection.pk]}
        ),
    )

    assert set(seen) == {"cli", "watcher", "beat", "api", "web", "admin"}
    for label, calls in seen.items():
        assert calls and all(isinstance(c, RefreshResult) for c in calls), (label, calls)
        assert _scanned(calls, name), label  # here, or in the index job's task
    for label in ("api", "web", "admin"):  # staff start a job; its task is the same service with the job
        started = next(c.job for c in seen[label] if c.job is not None)
        started.refresh_from_db()
        assert (started.kind, started.state) == (Job.Kind.INDEX, Job.State.DONE), label


@pytest.mark.django_db
def test_the_accounts_service_audits_every_change(run_cli, monkeypatch):
    from indexing.services.accounts import admin_ensure, user_password_set, user_unlock

    monkeypatch.setattr(sys, "stdin", io.StringIO("a-long-enough-secret-1\n"))
    code, out, err = run_cli("user", "create", "carol", "--staff", "--password-stdin")
    assert code == 0, err
    local = Access.local_user()
    user_password_set(username="carol", password="another-long-secret-2", access=local)
    assert get_user_model().objects.get(username="carol").check_password("another-long-secret-2")
    user_unlock(username="carol", addresses=("198.51.100.7",), access=local)
    admin = admin_ensure(username="admin", access=local)
    assert admin.password and get_user_model().objects.get(username="admin").is_superuser
    assert admin_ensure(username="admin", access=local).password is None  # already there: nothing changes

    events = [(e.action, e.target) for e in AuditEvent.objects.order_by("pk")]
    assert events == [
        ("user.create", "carol"),
        ("user.password", "carol"),
        ("user.unlock", "carol"),
        ("user.create", "admin"),
    ]
    assert all(e.actor_label.startswith("local user") for e in AuditEvent.objects.all())
    assert not any("secret" in json.dumps(e.detail) for e in AuditEvent.objects.all())

    code, _, err = run_cli("user", "create", "carol", "--password-stdin")
    assert code == 1 and "already exists" in err and "pmd user password carol" in err
    code, _, err = run_cli("user", "create", "[/x]", "--password-stdin")
    assert code == 1 and "cannot be a username" in err


@pytest.fixture
def searches(monkeypatch):
    return _spy(
        monkeypatch,
        "search.pipeline.dispatch",
        "search_run",
        ["pmd_site.api.search", "pmd_site.web.views.search", "pmd_site.mcp.tools", "pmd_site.cli.search"],
    )


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["keyword", "vector", "hybrid"])
def test_an_empty_query_is_the_same_typed_error_from_every_face(indexed_collection, searches, run_cli, boss, mode):
    import anyio
    from mcp import Client as McpClient

    from indexing.services.tokens import token_create
    from pmd_site.mcp.server import create_server
    from search.pipeline.dispatch import search_run
    from search.request import SearchRequest

    message = "empty query: a search needs words or a filter"
    with pytest.raises(EmptyQuery, match=message):
        search_run(SearchRequest(query="   ", mode=mode, access=Access.local_user()))
    got: dict[str, object] = {}

    searches.clear()
    verb = {"keyword": "search", "vector": "vsearch", "hybrid": "query"}[mode]
    code, _, err = run_cli(verb, "  ")
    assert code == 1 and message in err
    got["cli"] = searches[-1]

    searches.clear()
    api = Client(HTTP_AUTHORIZATION="Bearer " + token_create(user=boss, name="t", access=Access.local_user()).raw)
    answer = api.post("/api/search", {"query": "   ", "mode": mode}, content_type="application/json")
    assert answer.status_code == 422 and answer.json() == {"message": message, "suggestions": [], "code": "empty_query"}
    got["api"] = searches[-1]

    searches.clear()
    tool = {"keyword": "pmd_search", "vector": "pmd_vector_search", "hybrid": "pmd_deep_search"}[mode]

    async def call():
        async with McpClient(create_server()) as client:
            return await client.call_tool(tool, {"query": "   "})

    result = anyio.run(call)
    assert result.is_error and message in result.content[0].text
    got["mcp"] = searches[-1]

    searches.clear()
    browser = Client()
    browser.force_login(boss)
    page = browser.get("/", {"q": "  ", "mode": {"vector": "semantic"}.get(mode, mode)})
    assert page.status_code == 200 and page.context["searched"] is False and not page.context.get("problem")
    got["web"] = searches[-1]  # the page's "nothing asked yet" state is this error, not a check of its own

    assert {face: type(error) for face, error in got.items()} == dict.fromkeys(("cli", "api", "mcp", "web"), EmptyQuery)


@pytest.mark.django_db
def test_every_face_shows_the_detail_of_collection_detail(indexed_collection, run_cli, boss, monkeypatch):
    from indexing.models import FileProblem, PathContext
    from indexing.selectors import CollectionDetail
    from indexing.services.tokens import token_create

    name = indexed_collection.name
    FileProblem.objects.create(collection=indexed_collection, path="broken.md", severity="warning", message="odd")
    PathContext.objects.create(collection=indexed_collection, path_prefix="guides", text="how-tos")
    details = _spy(
        monkeypatch,
        "indexing.selectors",
        "collection_detail",
        ["pmd_site.api.collections", "pmd_site.web.views.collections", "pmd_site.cli.collections"],
    )

    code, out, err = run_cli("collection", "show", name, "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert {"path": "broken.md", "severity": "warning", "message": "odd"} in shown["problems"]
    assert shown["contexts"] == [{"path_prefix": "guides", "text": "how-tos"}]
    api = Client(HTTP_AUTHORIZATION="Bearer " + token_create(user=boss, name="t", access=Access.local_user()).raw)
    row = api.get(f"/api/collections/{name}").json()
    assert (row["name"], row["documents"], row["problems"]) == (name, shown["documents"], len(shown["problems"]))
    browser = Client()
    browser.force_login(boss)
    response = browser.post(f"/collections/{name}/share/", {"visibility": "everyone"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200 and response.context["row"]["name"] == name

    assert len(details) == 3 and all(isinstance(d, CollectionDetail) for d in details)
    assert {d.name for d in details} == {name}
    missing = api.get("/api/collections/nope")
    assert missing.status_code == 404 and missing.json()["code"] == "collection_not_found"
