"""MCP: the SDK's own client over stdio (`pmd mcp` subprocess) and Streamable HTTP (live ASGI server)."""

from __future__ import annotations

import json
import os
import sys

import anyio
import httpx
import pytest

from indexing.access import Access
from pmd_site.version import VERSION
from tests.support.mcp_client import SERVED_DB
from tests.support.mcp_client import http_client as _http_client
from tests.support.paths import ROOT

pytestmark = SERVED_DB

TOOLS = {
    "pmd_search",
    "pmd_vector_search",
    "pmd_deep_search",
    "pmd_get",
    "pmd_multi_get",
    "pmd_status",
    "pmd_links",
    "pmd_related",
    "pmd_fields",
    "pmd_search_history",
    "pmd_ask",
    "pmd_write_note",
    "pmd_edit_note",
    "pmd_move_note",
    "pmd_delete_note",
    "pmd_restore_note",
    "pmd_recent_activity",
}
WRITE_TOOLS = {"pmd_write_note", "pmd_edit_note", "pmd_move_note", "pmd_delete_note", "pmd_restore_note"}


async def _exercise(client, doc) -> dict:
    """initialize (by entering), list, call every tool, read a resource, get the prompt."""
    seen = {}
    tools = await client.list_tools()
    seen["tools"] = {t.name: t for t in tools.tools}
    seen["instructions"] = client.instructions
    seen["status"] = await client.call_tool("pmd_status", {})
    seen["get"] = await client.call_tool("pmd_get", {"ref": f"#{doc.docid}", "max_lines": 2, "line_numbers": True})
    seen["get_missing"] = await client.call_tool("pmd_get", {"ref": f"pmd://notes/{doc.path[:-3]}x.md"})
    seen["multi"] = await client.call_tool("pmd_multi_get", {"pattern": "notes/**", "max_bytes": 1_000_000})
    for name in ("pmd_search", "pmd_vector_search", "pmd_deep_search"):
        seen[name] = await client.call_tool(
            name,
            {"query": "postgres tuning", "limit": 3, "rerank": False}
            if name == "pmd_deep_search"
            else {"query": "postgres tuning", "limit": 3},
        )
    seen["resources"] = await client.list_resources()
    seen["resource"] = await client.read_resource(f"pmd://notes/{doc.path}")
    seen["resource_range"] = await client.read_resource(f"pmd://notes/{doc.path}?start=2&lines=1")
    seen["prompts"] = await client.list_prompts()
    seen["prompt"] = await client.get_prompt("research", {"question": "how do we tune postgres?"})
    return seen


def _check(seen: dict, collection) -> None:
    doc = collection.documents.filter(active=True).order_by("path").first()
    assert set(seen["tools"]) == TOOLS
    for tool in seen["tools"].values():
        assert tool.annotations.read_only_hint is (tool.name not in WRITE_TOOLS), tool.name
        assert tool.annotations.open_world_hint is False and tool.annotations.idempotent_hint is not None, tool.name
        assert tool.output_schema, tool.name
    assert "pmd://notes/" in seen["instructions"]

    status = seen["status"]
    assert not status.is_error
    assert status.structured_content["documents"] == collection.documents.filter(active=True).count()
    assert status.structured_content["collections"][0]["uri"] == "pmd://notes/"
    vectors = status.structured_content["embeddings"]
    assert vectors["embedded"] == 0 and vectors["pending"] > 0 and "pmd embed" in vectors["hint"]
    assert "0 texts embedded" in status.content[0].text

    got = seen["get"].structured_content
    lines = doc.content.body.splitlines()
    assert got["docid"] == doc.docid and got["from_line"] == 1 and got["to_line"] == 2
    assert got["text"].splitlines()[0].endswith(lines[0]) and got["text"].startswith("1  ")
    assert seen["get"].content[0].text.startswith(f"#{doc.docid} pmd://notes/{doc.path} lines 1-2")
    missing = seen["get_missing"]
    assert missing.is_error and f"pmd://notes/{doc.path}" in missing.content[0].text

    uris = {d["uri"] for d in seen["multi"].structured_content["documents"]}
    assert uris == {d.uri for d in collection.documents.filter(active=True)}

    # Nothing is embedded: semantic search says what to run, deep search still answers from keywords.
    for name, mode in (("pmd_search", "search"), ("pmd_deep_search", "query")):
        result = seen[name]
        assert not result.is_error, (name, result.content[0].text)
        assert result.structured_content["mode"] == mode
        assert {"docid", "uri", "line", "score", "snippet"} <= set(result.structured_content["results"][0])
    vector = seen["pmd_vector_search"]
    assert vector.is_error and "pmd_search" in vector.content[0].text and "pmd embed" not in vector.content[0].text

    listed = seen["resources"]
    assert {r.uri for r in listed.resources} == {d.uri for d in collection.documents.filter(active=True)}
    assert listed.next_cursor is None
    assert seen["resource"].contents[0].text == doc.content.body
    assert seen["resource_range"].contents[0].text == lines[1]
    assert [p.name for p in seen["prompts"].prompts] == ["research"]
    assert "how do we tune postgres?" in seen["prompt"].messages[0].content.text


def test_http_transport_end_to_end(asgi_server, token, indexed_collection):
    doc = indexed_collection.documents.filter(active=True).order_by("path").first()

    async def run():
        async with _http_client(asgi_server, token) as client:
            return await _exercise(client, doc)

    _check(anyio.run(run), indexed_collection)


def _initialize_body() -> dict:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}},
    }


def test_http_rejects_missing_invalid_revoked_token_and_foreign_origin(asgi_server, token):
    from indexing.services.tokens import token_revoke

    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with httpx.Client(base_url=asgi_server, timeout=10) as http:
        # Not a 401 challenge: an MCP client answers that with OAuth discovery, which pmd does not offer.
        missing = http.post("/mcp", json=_initialize_body(), headers=headers)
        assert missing.status_code == 403 and "www-authenticate" not in missing.headers
        assert missing.json()["id"] == 1 and "pmd token create" in missing.json()["error"]["message"]
        assert "token" in missing.json()["message"] and missing.json()["code"] == "unauthorized"
        invalid = http.post("/mcp", json=_initialize_body(), headers={**headers, "Authorization": "Bearer pmd_nope"})
        assert invalid.status_code == 403
        auth = {**headers, "Authorization": f"Bearer {token}"}
        ok = http.post("/mcp", json=_initialize_body(), headers=auth)
        assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "pmd"
        assert ok.json()["result"]["serverInfo"]["version"] == VERSION
        foreign = http.post("/mcp", json=_initialize_body(), headers={**auth, "Origin": "https://evil.example"})
        assert foreign.status_code == 403
        local_origin = http.post(
            "/mcp", json=_initialize_body(), headers={**auth, "Origin": asgi_server.replace("127.0.0.1", "localhost")}
        )
        assert local_origin.status_code == 200
        rebound = http.post("/mcp", json=_initialize_body(), headers={**auth, "Host": "attacker.example"})
        assert rebound.status_code == 421
        token_revoke(token=token, access=Access.local_user())
        assert http.post("/mcp", json=_initialize_body(), headers=auth).status_code == 403
        # Django still serves everything else from the same application.
        assert http.get("/api/status", headers={"Authorization": "Bearer pmd_nope"}).status_code == 401


def test_sdk_client_without_token_shows_how_to_get_one(asgi_server):
    """What a real client shows its user: pmd's message, not an OAuth attempt."""
    from mcp.shared.exceptions import MCPError

    async def run():
        async with _http_client(asgi_server, None) as client:
            await client.list_tools()

    with pytest.raises(BaseException) as raised:
        anyio.run(run)
    error = raised.value
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    assert isinstance(error, MCPError) and "pmd token create" in str(error)


def test_resources_list_is_paged(indexed_collection, monkeypatch):
    from pmd_site.mcp import resources

    monkeypatch.setattr(resources, "RESOURCES_PAGE", 2)
    every, cursor = [], None
    while True:
        page = resources._resource_page(cursor, access=Access.local_user())
        assert len(page.resources) <= 2
        every += [r.uri for r in page.resources]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert every == sorted(d.uri for d in indexed_collection.documents.filter(active=True))
    assert len(every) > 2


def test_mcp_allowed_hosts_are_configurable(settings):
    from pmd_site.asgi import transport_security

    settings.PMD_MCP_ALLOWED_HOSTS = ["search.example.org"]
    settings.PMD_MCP_ALLOWED_ORIGINS = ["https://search.example.org"]
    security = transport_security()
    assert security.enable_dns_rebinding_protection
    assert security.allowed_hosts == ["search.example.org", "search.example.org:*"]
    assert security.allowed_origins == ["https://search.example.org"]
    settings.PMD_MCP_ALLOWED_HOSTS = ["*"]
    assert transport_security().enable_dns_rebinding_protection is False


def _child_env(database_url: str) -> dict:
    """The test database, addressed by DATABASE_URL so `pmd mcp` neither starts nor stops a server."""
    env = {k: v for k, v in os.environ.items() if k in {"PATH", "HOME", "LANG", "PMD_SECRET_KEY", "PMD_HOME"}}
    env["DATABASE_URL"] = database_url
    env["PMD_INDEX"] = "default"
    return env


def test_stdio_transport_end_to_end(indexed_collection, database_url, monkeypatch):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    # The SDK binds its child's stderr default (sys.stderr) when first imported: an earlier test's
    # captured stream has no file descriptor. The child's log goes to the real stderr.
    monkeypatch.setattr(stdio_client.__wrapped__, "__defaults__", (sys.__stderr__,))

    doc = indexed_collection.documents.filter(active=True).order_by("path").first()
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "pmd_site.cli", "mcp"], env=_child_env(database_url), cwd=str(ROOT)
    )

    async def run():
        async with Client(params) as client:
            return await _exercise(client, doc)

    _check(anyio.run(run), indexed_collection)


def test_same_ranking_through_cli_api_and_mcp(asgi_server, token, indexed_collection, run_cli):
    query = "vector index notes"
    code, out, err = run_cli("search", query, "--json", "-n", "5")
    assert code == 0, err
    cli = [r["docid"] for r in json.loads(out)["results"]]
    assert len(cli) >= 2, "the fixture corpus should match the query in several documents"
    with httpx.Client(base_url=asgi_server, headers={"Authorization": f"Bearer {token}"}) as http:
        api = [r["docid"] for r in http.post("/api/search", json={"query": query, "limit": 5}).json()["results"]]

    async def run():
        async with _http_client(asgi_server, token) as client:
            result = await client.call_tool("pmd_search", {"query": query, "limit": 5})
            return [r["docid"] for r in result.structured_content["results"]]

    assert cli == api == anyio.run(run)


def test_stdio_without_an_index_says_where_it_looked(tmp_path):
    """A client config without PMD_HOME must not start a new, empty index at the default place."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if k in {"PATH", "LANG", "PMD_SECRET_KEY"}}
    env.update(HOME=str(tmp_path), XDG_DATA_HOME=str(tmp_path / "data"))
    done = subprocess.run(
        [sys.executable, "-m", "pmd_site.cli", "mcp"],
        env=env,
        cwd=str(ROOT),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert str(tmp_path / "data" / "pmd") in done.stderr and "PMD_HOME is not set" in done.stderr
    assert "pmd status" in done.stderr and "DATABASE_URL" in done.stderr
    assert not (tmp_path / "data").exists()  # nothing created
