"""multi-get is bounded on every face: max_bytes is validated, the whole answer has a total
limit (PMD_MULTI_GET_MAX_TOTAL_BYTES), and what was left out is listed with its reason or counted."""

from __future__ import annotations

import json

import anyio
import pytest

from tests.support.factories import api_client, make_user
from tests.support.mcp_client import SERVED_DB
from tests.support.mcp_client import http_client as _http_client

HUGE = 1_000_000_000_000  # the request that returned the whole index


@pytest.fixture
def api(django_user_model):
    member = make_user("reader")
    return api_client(member)


def _active(collection) -> list:
    return list(collection.documents.filter(active=True).select_related("content").order_by("path"))


def _text_bytes(body: dict) -> int:
    return sum(len(d["text"].encode()) for d in body["documents"] if d["text"] is not None)


@pytest.mark.django_db
def test_api_refuses_max_bytes_above_the_total_limit_or_not_positive(api, indexed_collection):
    huge = api.get("/api/multi-get", {"pattern": "**", "max_bytes": HUGE})
    assert huge.status_code == 422
    assert "PMD_MULTI_GET_MAX_TOTAL_BYTES" in huge.json()["message"]
    assert api.get("/api/multi-get", {"pattern": "**", "max_bytes": 0}).status_code == 422
    assert api.get("/api/multi-get", {"pattern": "**", "max_bytes": -5}).status_code == 422
    at_limit = api.get("/api/multi-get", {"pattern": "**", "max_bytes": 1024 * 1024})
    assert at_limit.status_code == 200 and at_limit.json()["max_total_bytes"] == 1024 * 1024


@pytest.mark.django_db
def test_api_total_limit_bounds_the_answer_and_says_what_was_left_out(api, indexed_collection, settings):
    docs = _active(indexed_collection)
    settings.PMD_MULTI_GET_MAX_TOTAL_BYTES = 700  # the corpus holds about 1,200 bytes
    body = api.get("/api/multi-get", {"pattern": "notes/**", "max_bytes": 600}).json()
    assert body["max_total_bytes"] == 700 and body["total_bytes"] <= 700
    assert _text_bytes(body) <= 700
    included = [d for d in body["documents"] if d["text"] is not None]
    limited = [d for d in body["documents"] if d["skipped"] == "total response limit reached (700 bytes)"]
    assert included and limited
    # Every matching document is returned, listed as left out, or counted.
    assert len(body["documents"]) + body["omitted"] == len(docs)
    assert "skipped" in body["notice"]


@pytest.mark.django_db
def test_api_lists_documents_over_max_bytes_with_their_size(api, indexed_collection):
    big = next(d for d in _active(indexed_collection) if d.path == "guides/postgres-tuning.md")
    body = api.get("/api/multi-get", {"pattern": "notes/guides/*.md", "max_bytes": 100}).json()
    reasons = {d["uri"]: d["skipped"] for d in body["documents"]}
    assert reasons[big.uri] == f"over max_bytes ({big.content.size:,} bytes > 100)"
    assert reasons["pmd://notes/guides/identifiers.md"] is None  # 99 bytes: included


@pytest.mark.django_db
def test_api_counts_what_it_cannot_even_list(api, indexed_collection, settings):
    settings.PMD_MULTI_GET_MAX_TOTAL_BYTES = 120  # room for about two entries
    body = api.get("/api/multi-get", {"pattern": "notes/**", "max_bytes": 10}).json()
    assert body["omitted"] > 0 and body["total_bytes"] <= 120
    assert len(body["documents"]) + body["omitted"] == len(_active(indexed_collection))
    assert f"{body['omitted']} more matching document(s) not listed: total response limit reached" in body["notice"]


@pytest.mark.django_db
def test_cli_refuses_a_max_bytes_above_the_limit(run_cli, indexed_collection):
    code, out, err = run_cli("multi-get", "notes/**", "--max-bytes", str(HUGE))
    assert code == 1 and out == ""
    assert "PMD_MULTI_GET_MAX_TOTAL_BYTES" in err
    code, out, err = run_cli("multi-get", "notes/**", "--max-bytes", "0")
    assert code == 1 and "positive" in err


@pytest.mark.django_db
def test_cli_text_and_json_show_what_the_limit_left_out(run_cli, indexed_collection, settings):
    settings.PMD_MULTI_GET_MAX_TOTAL_BYTES = 700
    code, out, err = run_cli("multi-get", "notes/**", "--max-bytes", "600")
    assert code == 0
    assert "[skipped: total response limit reached (700 bytes)" in out
    assert "skipped" in err and "narrow the pattern" in err
    code, out, _ = run_cli("multi-get", "notes/**", "--max-bytes", "600", "--json")
    body = json.loads(out)
    assert _text_bytes(body) <= 700 and body["total_bytes"] <= 700
    assert any(d["skipped"] == "total response limit reached (700 bytes)" for d in body["documents"])
    assert len(body["documents"]) + body["omitted"] == len(_active(indexed_collection))


# --- MCP over HTTP (a member's token), through the live ASGI application ------------------------


@SERVED_DB
def test_mcp_tool_refuses_huge_max_bytes_and_bounds_the_answer(asgi_server, token, indexed_collection, settings):
    async def run():
        async with _http_client(asgi_server, token) as client:
            huge = await client.call_tool("pmd_multi_get", {"pattern": "**", "max_bytes": HUGE})
            settings.PMD_MULTI_GET_MAX_TOTAL_BYTES = 700
            bounded = await client.call_tool("pmd_multi_get", {"pattern": "notes/**", "max_bytes": 600})
            return huge, bounded

    huge, bounded = anyio.run(run)
    assert huge.is_error and "PMD_MULTI_GET_MAX_TOTAL_BYTES" in huge.content[0].text
    body = bounded.structured_content
    assert not bounded.is_error and body["max_total_bytes"] == 700 and _text_bytes(body) <= 700
    assert any(d["skipped"] == "total response limit reached (700 bytes)" for d in body["documents"])
    assert len(body["documents"]) + body["omitted"] == len(_active(indexed_collection))
    assert "[skipped: total response limit reached" in bounded.content[0].text
    assert "note:" in bounded.content[0].text


@pytest.mark.django_db
def test_api_repeated_references_are_one_document_and_long_lists_are_refused(api, indexed_collection):
    doc = _active(indexed_collection)[0]
    refs = ",".join([doc.uri] * 50 + [f"#{doc.docid}"] * 50)
    answer = api.get("/api/multi-get", {"pattern": refs})
    assert answer.status_code == 200
    listed = [d["uri"] for d in answer.json()["documents"]]
    assert listed == [doc.uri]  # a path and a docid naming the same note: listed once
    many = ",".join(f"notes/missing-{i}.md" for i in range(201))
    refused = api.get("/api/multi-get", {"pattern": many})
    assert refused.status_code == 422 and "at most 200" in refused.json()["message"]
