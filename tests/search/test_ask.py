"""Ask (search.pipeline.answer) through the Ollama-compatible test server: grounding, the citation
check, refusal on weak evidence, access (also through a follow-up), cancellation, the deadline,
the rate limit, both backends' streams and the packing budget."""

from __future__ import annotations

import time

import pytest

from indexing.access import Access
from indexing.errors import AnswerModelUnset, AskThrottled, ConversationNotFound
from indexing.models import Answer, Collection
from search.pipeline.answer import AskRequest, ask_run, ask_stream, citations_check, passages_pack
from search.pipeline.deadline import wait_for_stragglers
from search.results import SearchResult
from tests.support.factories import make_user, make_vault
from tests.support.ollama_server import answer_from_passages

pytestmark = pytest.mark.django_db(transaction=True)  # retrieval threads read committed data

TEAM = {
    "vacuum.md": "# Tuning PostgreSQL autovacuum\n\nLower autovacuum_vacuum_scale_factor so vacuum runs after "
    "fewer dead tuples. Dead rows bloat tables and slow every query.\n",
    "bread.md": "# Baking sourdough bread\n\nFeed the starter flour and water, let the dough rise overnight, "
    "bake in a hot oven until the crust is dark.\n",
}
SECRET = {
    "salaries.md": "# PostgreSQL autovacuum salaries\n\nThe autovacuum team earns secret salaries: vacuum "
    "bonus 9000 for fewer dead tuples.\n",
}


@pytest.fixture
def notes(tmp_path, ollama, settings):
    """Two collections: `team` (everyone) and `secret` (private to its owner); embedded."""
    settings.PMD_CHUNK_TOKENS = 200
    settings.PMD_GENERATE_MODEL = "none"  # the test server's chat answers only the question
    settings.PMD_RERANK_MODEL = "none"
    settings.PMD_ANSWER_MODEL = "qwen3:0.6b"
    settings.PMD_ANSWER_MIN_SCORE = 0.3
    settings.PMD_ANSWER_RATE = 0
    settings.PMD_ANSWER_TIMEOUT = 20.0
    owner = make_user("owner")
    make_vault(tmp_path / "team", TEAM, name="team")
    make_vault(tmp_path / "secret", SECRET, name="secret", embed=True)
    Collection.objects.filter(name="secret").update(visibility=Collection.Visibility.PRIVATE, owner=owner)
    ollama.chat_handler = answer_from_passages("cite")
    ollama.requests.clear()
    yield ollama
    assert wait_for_stragglers(30), "a pipeline thread outlived its test"


def ask(question: str, access=None, **kwargs):
    return ask_run(AskRequest(question=question, access=access or Access.local_user(), **kwargs))


def test_answer_cites_the_passages_it_was_given_and_is_recorded(notes):
    answer = ask("how do I tune autovacuum dead tuples", collections=["team"])
    assert answer.state == "answered"
    assert answer.passages and answer.passages[0].path == "vacuum.md"
    assert answer.cited and set(answer.cited) <= {p.number for p in answer.passages}
    assert "[1]" in answer.text and not answer.flags
    assert answer.passages[0].source.startswith("pmd://team/vacuum.md:")
    chat = notes.requests_to("/api/chat")[-1].body
    assert chat["stream"] is True and chat["model"] == "qwen3:0.6b"
    assert "only the numbered passages" in chat["messages"][0]["content"]
    row = Answer.objects.get(id=answer.id)
    assert row.model == "qwen3:0.6b" and row.tokens_in > 0 and row.tokens_out > 0
    assert row.passages[0]["uri"] == "pmd://team/vacuum.md" and row.cited == answer.cited
    assert row.first_token_ms is not None and row.total_ms >= row.first_token_ms >= row.retrieval_ms


def test_invented_citation_is_removed_and_flagged(notes):
    notes.chat_handler = answer_from_passages("invent")
    answer = ask("autovacuum dead tuples", collections=["team"])
    assert "[99]" not in answer.text and "[1]" in answer.text
    assert [f["code"] for f in answer.flags] == ["invented_citation"] and answer.flags[0]["number"] == 99


def test_an_answer_without_a_valid_citation_says_so(notes):
    notes.chat_handler = answer_from_passages("none")
    answer = ask("autovacuum dead tuples", collections=["team"])
    assert answer.cited == [] and answer.flags[-1]["code"] == "uncited"
    assert "cites none of the notes" in answer.text


def test_weak_evidence_says_the_notes_do_not_cover_it_and_lists_the_nearest(notes, settings):
    settings.PMD_ANSWER_MIN_SCORE = 1.01  # nothing is strong enough
    answer = ask("autovacuum dead tuples", collections=["team"])
    assert answer.state == "refused" and answer.text.startswith("The notes do not cover this")
    assert answer.nearest and answer.nearest[0]["uri"] == "pmd://team/vacuum.md"
    assert answer.passages == [] and not notes.requests_to("/api/chat")  # the model was not asked


def test_a_members_answer_never_cites_a_hidden_collection_even_in_a_follow_up(notes):
    member = make_user("member")
    access = Access.for_user(member)
    first = ask("autovacuum salaries dead tuples", access)
    assert first.passages and all(p.collection == "team" for p in first.passages)
    follow = ask("and the vacuum bonus salaries?", access, conversation=first.conversation)
    assert all(p.collection == "team" for p in follow.passages)
    for request in notes.requests_to("/api/chat"):
        assert "salar" not in request.body["messages"][-1]["content"].split("Question:")[0]
        assert "secret" not in str(request.body["messages"])
    # the owner does get them; and a conversation is the asker's own
    owner_answer = ask("autovacuum salaries bonus", Access.for_user(make_user("owner2", superuser=True)))
    assert any(p.collection == "secret" for p in owner_answer.passages)
    with pytest.raises(ConversationNotFound):
        ask("again", Access.for_user(make_user("other")), conversation=first.conversation)


def test_a_follow_up_joins_the_previous_question_and_answer(notes):
    first = ask("autovacuum dead tuples", collections=["team"])
    ask("what should I lower?", collections=["team"], conversation=first.conversation)
    messages = notes.requests_to("/api/chat")[-1].body["messages"]
    assert messages[1] == {"role": "user", "content": "autovacuum dead tuples"}
    assert messages[2]["role"] == "assistant" and "[1]" not in messages[2]["content"]
    assert Answer.objects.filter(conversation=first.conversation).count() == 2


def test_closing_the_stream_stops_the_model_and_records_a_cancelled_answer(notes):
    notes.stream_delay = 0.2
    stream = ask_stream(AskRequest(question="autovacuum dead tuples", access=Access.local_user(), collections=["team"]))
    kinds = []
    for event in stream:
        kinds.append(event.kind)
        if event.kind == "token":
            break
    stream.close()
    assert kinds[0] == "passages"
    row = Answer.objects.get()
    assert row.state == "cancelled" and row.text
    deadline = time.monotonic() + 3
    while not notes.stream_closed_early and time.monotonic() < deadline:
        time.sleep(0.05)
    assert notes.stream_closed_early == 1  # the server saw the reader go


def test_the_deadline_cuts_the_answer_short(notes, settings):
    notes.stream_delay = 0.3
    settings.PMD_ANSWER_TIMEOUT = 0.5
    answer = ask("autovacuum dead tuples", collections=["team"])
    assert answer.state == "cut_short" and any(f["code"] == "deadline" for f in answer.flags)


def test_openai_compatible_backend_streams_with_usage(notes, ollama_openai):
    answer = ask("autovacuum dead tuples", collections=["team"])
    assert answer.state == "answered" and answer.cited and answer.tokens_in > 0
    assert notes.requests_to("/v1/chat/completions")[-1].body["stream"] is True


def test_rate_limit_per_user(notes, settings):
    settings.PMD_ANSWER_RATE = 1
    access = Access.for_user(make_user("asker"))
    ask("autovacuum dead tuples", access)
    with pytest.raises(AskThrottled) as caught:
        ask("autovacuum dead tuples", access)
    assert 1 <= caught.value.retry_after <= 60 and caught.value.headers["Retry-After"]
    ask("autovacuum dead tuples", Access.for_user(make_user("someone")))  # another user is not limited


def test_without_a_model_asking_explains_how_to_set_one(notes, settings):
    settings.PMD_ANSWER_MODEL = ""
    with pytest.raises(AnswerModelUnset) as caught:
        ask("autovacuum")
    assert "PMD_ANSWER_MODEL" in caught.value.message


@pytest.mark.django_db(transaction=False)
def test_citation_check_keeps_valid_numbers_only():
    text, cited, flags = citations_check("A [1]. B [2, 7]. C [5].", 2)
    assert text == "A [1]. B [2]. C." and cited == [1, 2]
    assert [f["number"] for f in flags] == [7, 5]


@pytest.mark.django_db(transaction=False)
def test_packing_stays_within_the_budget_in_rank_order():
    results = [
        SearchResult(
            docid="x",
            collection="c",
            path=f"{n}.md",
            title=f"t{n}",
            score=1 - n / 10,
            snippet=("word " * (100 * (n + 1))).strip(),
        )
        for n in range(6)
    ]
    passages = passages_pack(results, budget=1000)
    assert [p.path for p in passages][:2] == ["0.md", "1.md"]
    assert sum(p.tokens for p in passages) <= 1000
    assert len(passages_pack(results, budget=8000)) > len(passages)


@pytest.mark.django_db(transaction=False)
def test_packing_takes_the_indexed_section_at_the_hit_line(tmp_path):
    """Each hit's section as the keyword index cut it (no whole body is read): the section holding
    the line, not its neighbours; a piece of a long section keeps the section's heading."""
    long_section = "\n\n".join(f"Paragraph {n} " + "filler words here " * 60 for n in range(8))
    notes = {
        "book.md": "---\ntitle: Book\n---\n\n# Book\n\n## Alpha\n\nAlpha text about apples.\n\n"
        "## Beta\n\nBeta text about bread.\n\n## Long\n\n" + long_section + "\n\nThe last words.\n"
    }
    make_vault(tmp_path / "lib", notes, name="lib")
    lines = notes["book.md"].splitlines()
    beta = lines.index("Beta text about bread.") + 1
    last = lines.index("The last words.") + 1
    hit = dict(docid="x", collection="lib", path="book.md", title="Book", score=0.9)
    beta_passage, last_passage = passages_pack(
        [SearchResult(line=beta, **hit), SearchResult(line=last, **hit)], budget=8000
    )
    assert beta_passage.text == "## Beta\n\nBeta text about bread."
    assert last_passage.text.startswith("## Long\n") and last_passage.text.endswith("The last words.")
    assert "Paragraph 0" not in last_passage.text  # the piece around the line, not the whole section
    missing = passages_pack([SearchResult(line=3, snippet="as shown", **{**hit, "path": "gone.md"})], budget=8000)
    assert [p.text for p in missing] == ["as shown"]  # not indexed (any more): the snippet
