"""What one's history and staff's analytics show stays within what the reader sees: a token limited
to one collection never reads an answer or a logged search that drew on another; staff without
access to a collection see neither its notes in the search log nor its name and folder in the
status report; a result opened or rated is a note the rater sees, never any other string."""

from __future__ import annotations

import time
import uuid

import pytest

from indexing.access import Access
from indexing.models import Collection, SearchFeedback, SearchLogEntry
from indexing.selectors import search_log_report
from indexing.services.answers import answer_record
from tests.support.factories import api_client, make_user, make_vault, web_client

pytest_plugins = ["tests.support.ollama_fixtures"]

PUB = {"open.md": "# Open\n\nthe garden plan\n"}
SECRET = {"zanzibar.md": "# Zanzibar\n\nvioletmongoose payroll\n"}


@pytest.fixture
def notes(db, tmp_path):
    """`pub` for every member; `secret` private to alice."""
    alice = make_user("alice")
    make_vault(tmp_path / "pub", PUB, name="pub")
    make_vault(tmp_path / "secret", SECRET, name="secret")
    Collection.objects.filter(name="secret").update(visibility=Collection.Visibility.PRIVATE, owner=alice)
    return alice


def _answer(user, collection: str, path: str, question: str):
    return answer_record(
        user=user,
        conversation=uuid.uuid4(),
        question=question,
        text=f"from [1] of {collection}",
        state="answered",
        model="m",
        tokens_in=1,
        tokens_out=1,
        cited=[1],
        flags=[],
        retrieval_ms=1,
        first_token_ms=1,
        total_ms=1,
        passages=[
            {
                "number": 1,
                "collection": collection,
                "path": path,
                "title": path,
                "line": 1,
                "score": 1.0,
                "uri": f"pmd://{collection}/{path}",
                "tokens": 3,
            }
        ],
    )


def _search(user, query: str, *, token=None, opened: str = "", rated: str = "") -> SearchLogEntry:
    entry = SearchLogEntry.objects.create(
        user=user,
        token=token,
        face="web",
        mode="keyword",
        query=query,
        results=1,
        top_score=0.9,
        latency_ms=5,
        opened_uri=opened,
    )
    if rated:
        SearchFeedback.objects.create(entry=entry, uri=rated, helpful=False)
    return entry


def test_a_token_limited_to_one_collection_reads_no_answer_citing_another(notes):
    alice = notes
    shown = _answer(alice, "pub", "open.md", "what is the garden plan")
    hidden = _answer(alice, "secret", "zanzibar.md", "who gets the violetmongoose payroll")
    limited = api_client(alice, collections=["pub"])

    answers = limited.get("/api/answers")
    assert answers.status_code == 200
    assert [a["conversation"] for a in answers.json()] == [str(shown.conversation)]
    assert "secret" not in answers.content.decode() and "violetmongoose" not in answers.content.decode()
    # a conversation it cannot read is one that does not exist: no deleting it either
    gone = limited.delete(f"/api/answers/{hidden.conversation}")
    assert gone.status_code == 404 and gone.json()["code"] == "conversation_not_found"
    assert alice.answers.filter(pk=hidden.pk).exists()
    # alice herself, and a token of hers without a limit, still read both
    assert len(api_client(alice).get("/api/answers").json()) == 2
    assert len(api_client(alice, write=False).get("/api/answers").json()) == 2


def test_a_follow_up_through_a_limited_token_finds_no_conversation_citing_another(notes):
    from indexing.errors import ConversationNotFound
    from indexing.selectors import conversation_answers
    from indexing.services.tokens import token_create

    alice = notes
    hidden = _answer(alice, "secret", "zanzibar.md", "who gets the violetmongoose payroll")
    made = token_create(user=alice, access=Access.local_user(), can_write=True, collections=["pub"])
    limited = Access.for_token(made.token)
    with pytest.raises(ConversationNotFound):
        conversation_answers(access=limited, conversation=hidden.conversation)
    assert conversation_answers(access=Access.for_user(alice), conversation=hidden.conversation) == [hidden]


def test_a_token_limited_to_one_collection_reads_no_logged_search_of_another(notes):
    alice = notes
    _search(alice, "violetmongoose", opened="pmd://secret/zanzibar.md")
    _search(alice, "payroll rating", rated="pmd://secret/zanzibar.md")
    _search(alice, "typed on the web")  # made with all her access: not known to stay within `pub`
    limited = api_client(alice, collections=["pub"])
    through_token = limited.post("/api/search", {"query": "garden"}, content_type="application/json").json()
    assert limited.post(
        f"/api/searches/{through_token['search_id']}/opened",
        {"uri": "pmd://pub/open.md"},
        content_type="application/json",
    ).json() == {"recorded": True}

    report = limited.get("/api/searches", {"limit": 100})
    assert report.status_code == 200
    text = report.content.decode()
    assert "secret" not in text and "violetmongoose" not in text and "payroll" not in text
    assert "typed on the web" not in text
    data = report.json()
    assert [r["query"] for r in data["top"]] == ["garden"] and data["searches"] == 1
    assert [r["opened"] for r in data["recent"]] == ["pmd://pub/open.md"]
    assert data["feedback"] == [] and data["everyone"] is False

    # alice on the web sees all of her own searches, her own notes included
    page = web_client(alice).get("/status/searches/", {"days": 7}).content.decode()
    assert "violetmongoose" in page and "pmd://secret/zanzibar.md" in page


def test_staff_without_access_see_no_search_that_opened_or_rated_a_hidden_note(notes):
    alice = notes
    staffy = make_user("staffy", staff=True)
    _search(alice, "violetmongoose", opened="pmd://secret/zanzibar.md")
    _search(alice, "zanzibar payroll", rated="pmd://secret/zanzibar.md")
    _search(alice, "garden", opened="pmd://pub/open.md")

    for text in (
        api_client(staffy).get("/api/searches", {"limit": 100}).content.decode(),
        web_client(staffy).get("/status/searches/", {"days": 7}).content.decode(),
    ):
        assert "garden" in text
        assert "zanzibar" not in text and "violetmongoose" not in text and "secret" not in text
    report = search_log_report(access=Access.for_user(staffy), days=7)
    assert report["searches"] == 1 and report["opened"] == 1 and report["feedback"] == []
    assert [r["opened"] for r in report["recent"]] == ["pmd://pub/open.md"]
    # a superuser sees every collection, so every search
    boss = make_user("boss", superuser=True)
    assert search_log_report(access=Access.for_user(boss), days=7)["searches"] == 3


def test_staff_without_access_see_no_hidden_collection_under_the_watcher(notes, monkeypatch, tmp_path, ollama_down):
    from pmd_site.watcher import heartbeat

    beat = {
        "at": time.time(),
        "mode": "events",
        "last_change_at": None,
        "pid": 1,
        "collections": [
            {"name": "pub", "path": str(tmp_path / "pub")},
            {"name": "secret", "path": str(tmp_path / "secret")},
        ],
        "last_reindex": {
            "collections": ["pub", "secret"],
            "changed": 3,
            "removed": 0,
            "commits": 0,
            "embedding_task": None,
            "seconds": 0.1,
            "skipped": [],
        },
    }
    monkeypatch.setattr(heartbeat, "read_heartbeat", lambda: beat)
    staffy = make_user("staffy", staff=True)

    watcher = api_client(staffy).get("/api/status", {"section": "watcher"}).json()["watcher"]
    assert watcher["collections"] == [{"name": "pub", "path": str(tmp_path / "pub")}]
    assert watcher["last_reindex"] == {"collections": ["pub"]}
    for text in (
        api_client(staffy).get("/api/status").content.decode(),
        web_client(staffy).get("/status/").content.decode(),
    ):
        assert "secret" not in text and str(tmp_path / "pub") in text
    # a missing collection reads the same: the status names only collections one sees
    assert "secret" not in api_client(make_user("member")).get("/api/status").content.decode()
    # staff who see everything see the whole heartbeat
    boss = make_user("boss", superuser=True)
    whole = web_client(boss).get("/status/").content.decode()
    assert str(tmp_path / "secret") in whole
    assert api_client(boss).get("/api/status", {"section": "watcher"}).json()["watcher"]["last_reindex"]["changed"] == 3


@pytest.mark.parametrize(
    "uri",
    [
        "javascript:alert(1)",
        "pmd://pub/invented.md",
        "pmd://secret/zanzibar.md",
        "pmd://nowhere/open.md",
        "https://example.com/pmd://pub/open.md",
    ],
)
def test_only_a_note_the_rater_sees_can_be_opened_or_rated(notes, uri):
    bob = make_user("bob")
    api = api_client(bob)
    sid = api.post("/api/search", {"query": "garden"}, content_type="application/json").json()["search_id"]
    for path, body in (
        (f"/api/searches/{sid}/opened", {"uri": uri}),
        (f"/api/searches/{sid}/feedback", {"uri": uri, "helpful": True}),
    ):
        refused = api.post(path, body, content_type="application/json")
        assert refused.status_code == 404, refused.content
        assert refused.json()["code"] in {"document_not_found", "collection_not_found"}
    web = web_client(bob).post("/feedback/", {"sid": sid, "uri": uri, "helpful": "1"}, HTTP_HX_REQUEST="true")
    assert web.status_code == 404
    assert SearchFeedback.objects.count() == 0 and SearchLogEntry.objects.get(pk=sid).opened_uri == ""
    # the same search, with a note bob sees
    assert api.post(
        f"/api/searches/{sid}/feedback", {"uri": "pmd://pub/open.md", "helpful": True}, content_type="application/json"
    ).json() == {"recorded": True}


def test_a_stored_uri_that_is_no_note_is_never_shown(notes):
    alice = notes
    boss = make_user("boss", superuser=True)
    _search(alice, "clicked a link", opened="javascript:alert(1)", rated="javascript:alert(2)")
    report = search_log_report(access=Access.for_user(boss), days=7)
    assert [r["opened"] for r in report["recent"]] == [""] and report["feedback"] == [] and report["opened"] == 0
    page = web_client(boss).get("/status/searches/", {"days": 7}).content.decode()
    assert "clicked a link" in page and "javascript:" not in page
