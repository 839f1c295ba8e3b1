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
        user=user, conversation=uuid.uuid4(), question=question, text=f"from [1] of {collection}", state="answered",
        model="m", tokens_in=1, tokens_out=1, cited=[1], flags=[], retrieval_ms=1, first_token_ms=1, total_ms=1,
        passages=[{"number": 1, "collection": collection, "path": path, "title": path, "line": 1, "score": 1.0,
                   "uri": f"pmd://{collection}/{path}", "tokens": 3}])


def _search(user, query: str, *, token=None, opened: str = "", rated: str = "") -> SearchLogEntry:
    entry = SearchLogEntry.objects.create(user=user, token=token, face="web", mode="keyword", query=query, results=1,
                                          top_score=0.9, latency_ms=5, opened_uri=opened)
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


