"""Ask through every face: `pmd ask` (streamed), POST /api/ask whole and as server-sent events,
MCP pmd_ask, the web Ask mode (the stream, citations linked to the line, follow-up, delete), and
a member who never gets a hidden collection's passage through any of them."""

from __future__ import annotations

import json

import pytest

from indexing.models import Answer, Collection
from search.pipeline.deadline import wait_for_stragglers
from tests.support.factories import api_client, make_user, make_vault, web_client
from tests.support.ollama_server import answer_from_passages

pytestmark = pytest.mark.django_db(transaction=True)  # retrieval threads read committed data

NOTES = {
    "vacuum.md": "# Tuning PostgreSQL autovacuum\n\nLower autovacuum_vacuum_scale_factor so vacuum runs "
    "after fewer dead tuples.\n"
}
HIDDEN = {"pay.md": "# Autovacuum pay\n\nThe autovacuum dead tuples team is paid a secret bonus.\n"}


@pytest.fixture
def notes(tmp_path, ollama, settings):
    settings.PMD_CHUNK_TOKENS = 200
    settings.PMD_GENERATE_MODEL = "none"
    settings.PMD_RERANK_MODEL = "none"
    settings.PMD_ANSWER_MODEL = "qwen3:0.6b"
    settings.PMD_ANSWER_RATE = 0
    owner = make_user("owner")
    make_vault(tmp_path / "team", NOTES, name="team")
    make_vault(tmp_path / "hidden", HIDDEN, name="hidden", embed=True)
    Collection.objects.filter(name="hidden").update(visibility=Collection.Visibility.PRIVATE, owner=owner)
    ollama.chat_handler = answer_from_passages("cite")
    yield ollama
    assert wait_for_stragglers(30)


def sse(text: str) -> list[tuple[str, dict]]:
    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def test_cli_ask_streams_the_answer_then_its_sources(notes, run_cli):
    code, out, err = run_cli("ask", "how", "to", "tune", "autovacuum", "-c", "team")
    assert code == 0, err
    assert "[1]" in out and "sources:" in out and "[1] pmd://team/vacuum.md:" in out
    assert "follow up: pmd ask --follow-up" in err
    code, out, _ = run_cli("ask", "autovacuum", "-c", "team", "--json")
    assert code == 0 and json.loads(out)["cited"] == [1]


def test_cli_ask_without_a_model_says_how_to_set_one(notes, run_cli, settings):
    settings.PMD_ANSWER_MODEL = "none"
    code, _, err = run_cli("ask", "autovacuum")
    assert code == 1 and "ollama pull" in err and "`pmd config set PMD_ANSWER_MODEL=qwen3:1.7b`" in err
    assert ".env" not in err  # `pmd up` reads the index's configuration, not a .env file


def test_api_ask_whole_and_streamed_for_a_member(notes):
    client = api_client(make_user("member"))
    answer = client.post("/api/ask", {"question": "autovacuum dead tuples"}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    data = answer.json()
    assert data["state"] == "answered" and {p["collection"] for p in data["passages"]} == {"team"}
    streamed = client.post(
        "/api/ask", {"question": "autovacuum dead tuples", "stream": True}, content_type="application/json"
    )
    assert streamed["Content-Type"] == "text/event-stream"
    events = sse(b"".join(streamed.streaming_content).decode())
    kinds = [k for k, _ in events]
    assert kinds[0] == "passages" and kinds[-1] == "done" and kinds.count("token") >= 2
    assert "".join(d["text"] for k, d in events if k == "token").startswith("# Tuning PostgreSQL")
    assert "hidden" not in json.dumps(events) and "bonus" not in json.dumps(events)
    conversation = events[-1][1]["conversation"]
    assert client.get("/api/answers").json()[0]["conversation"] == conversation
    assert client.delete(f"/api/answers/{conversation}").json()["deleted"] == 1
    assert client.delete(f"/api/answers/{conversation}").status_code == 404


def test_api_ask_throttled_and_unconfigured(notes, settings):
    client = api_client(make_user("member"))
    settings.PMD_ANSWER_MODEL = ""
    unset = client.post("/api/ask", {"question": "autovacuum"}, content_type="application/json")
    assert unset.status_code == 503 and unset.json()["code"] == "answer_model_unset"
    settings.PMD_ANSWER_MODEL = "qwen3:0.6b"
    settings.PMD_ANSWER_RATE = 1
    client.post("/api/ask", {"question": "autovacuum"}, content_type="application/json")
    throttled = client.post("/api/ask", {"question": "autovacuum", "stream": True}, content_type="application/json")
    assert throttled.status_code == 429 and throttled["Retry-After"]


def test_mcp_pmd_ask(notes):
    from tests.support.mcp_client import call_tool, close_other_connections

    result = call_tool("pmd_ask", {"question": "autovacuum dead tuples", "collections": ["team"]})
    close_other_connections()  # the tool's worker thread kept its connection (see tests/support/mcp_client.py)
    assert result["state"] == "answered" and result["passages"][0]["source"].startswith("pmd://team/vacuum.md:")
    assert result["passages"][0].get("text") is None  # an agent reads the note with pmd_get


def test_web_ask_mode_streams_and_links_citations_to_the_line(notes):
    client = web_client(make_user("member"))
    page = client.get("/", {"q": "autovacuum dead tuples", "mode": "ask"})
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-ask-stream="/ask/stream?' in html and 'value="ask" checked' in html
    typing = client.get(
        "/", {"q": "autovacuum", "mode": "ask"}, HTTP_HX_REQUEST="true", HTTP_HX_TARGET="results", HTTP_HX_TRIGGER="q"
    )
    assert "data-ask-stream" not in typing.content.decode() and "press <kbd>Enter</kbd>" in typing.content.decode()
    stream = client.get("/ask/stream", {"q": "autovacuum dead tuples"})
    events = sse(b"".join(stream.streaming_content).decode())
    done = events[-1][1]["html"]
    assert 'class="cite" href="/doc/team/vacuum.md?line=' in done and "#L" in done
    assert "pmd://hidden" not in done and "/doc/hidden/" not in done and "bonus" not in done
    conversation = events[-1][1]["conversation"]
    follow = client.get("/", {"q": "and then?", "mode": "ask", "conversation": conversation})
    assert f"conversation={conversation}" in follow.content.decode()
    assert client.post(f"/ask/{conversation}/delete/").status_code == 200
    assert not Answer.objects.filter(conversation=conversation).exists()


def test_web_ask_mode_without_a_model_explains_it(notes, settings):
    settings.PMD_ANSWER_MODEL = ""
    page = client_page = web_client(make_user("member")).get("/", {"q": "autovacuum", "mode": "ask"})
    assert "Ask needs a chat model" in page.content.decode() and "PMD_ANSWER_MODEL" in client_page.content.decode()


def test_status_adds_up_answers_per_model_for_staff_only(run_cli):
    from indexing.access import Access
    from pmd_site.reports.status import status_report

    asker = make_user("asker")
    for model, total, tokens in (
        ("qwen3:1.7b", 900.0, 100),
        ("qwen3:1.7b", 1500.0, 300),
        ("qwen3:1.7b", 3000.0, 200),
        ("llama3.2", 400.0, 50),
        ("", 10.0, 0),
    ):  # "": refused, no model asked
        Answer.objects.create(
            user=asker,
            question="q",
            model=model,
            tokens_in=tokens,
            tokens_out=tokens // 10,
            retrieval_ms=5,
            first_token_ms=total / 3,
            total_ms=total,
        )
    code, out, err = run_cli("status", "--json")
    assert code == 0, err
    rows = {row["model"]: row for row in json.loads(out)["answers"]["by_model"]}
    assert rows.keys() == {"qwen3:1.7b", "llama3.2"}
    assert rows["qwen3:1.7b"] == {
        "model": "qwen3:1.7b",
        "answers": 3,
        "tokens_in": 600,
        "tokens_out": 60,
        "median_ms": 1500.0,
        "median_first_token_ms": 500.0,
    }
    code, out, _ = run_cli("status")
    assert "Answers by model:" in out and "Model: qwen3:1.7b" in out and "Median answer time: 1.5 s" in out
    member = status_report(["answers"], access=Access.for_user(asker))
    assert member == {"answers": {"ok": True}}  # every user's questions add up here: staff only
