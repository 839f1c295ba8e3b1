"""Ask: an answer written from the asker's own notes, every claim cited, honest when they are silent.

One service for every face (`pmd ask`, the web Ask mode, POST /api/ask, MCP pmd_ask):

1. retrieve with the hybrid pipeline *as the asker* (their Access: a member never gets a passage,
   hence never a sentence, from a collection they cannot see), the follow-up's previous question
   joined to the new one;
2. when the best hit is weak (shown score under PMD_ANSWER_MIN_SCORE) or there is none, say the
   notes do not cover it and list the nearest notes: the model is not asked, so it cannot invent;
3. pack the best passages (the chunk around each hit's line) within PMD_ANSWER_BUDGET tokens;
4. ask the chat model (PMD_ANSWER_MODEL) to answer only from them, citing [n], streamed;
5. check the citations: one to a passage not given is removed and flagged; an answer with no
   valid citation says so;
6. record model, tokens, passages and latency (indexing.models.Answer), bounded by
   PMD_ANSWER_TIMEOUT, stopped when the reader leaves (closing the stream closes the model's).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings

from indexing.access import visible_collection_names
from indexing.chunking import count_tokens
from indexing.errors import AnswerModelUnset, ConversationNotFound, LLMBackendError, LLMBackendTimeout
from indexing.llm import get_backend
from indexing.models import Answer
from indexing.selectors import SectionText, conversation_answers, sections_at
from indexing.services.answers import answer_record
from indexing.services.throttling import ask_rate_check
from search.pipeline.dispatch import search_run
from search.request import Mode, SearchRequest
from search.results import SearchResult

if TYPE_CHECKING:
    from indexing.access import Access
    from search.filters import SearchFilters

# Tokens kept for the instructions, the question and a follow-up's previous turn; the passages get
# the rest of the budget.
PROMPT_RESERVE = 300
NEAREST = 5
INSTRUCTIONS = (
    "You answer questions using only the numbered passages from the user's notes. After every "
    "sentence that states something from them, cite the passage numbers in square brackets, like [1] "
    "or [2][3]. Cite only numbers of passages you were given. If the passages do not contain the "
    "answer, say that the notes do not cover it. Do not use outside knowledge. Answer briefly, in the "
    "language of the question."
)
NOT_COVERED = "The notes do not cover this."
UNCITED = "This answer cites none of the notes' passages: do not rely on it."
_CITATION = re.compile(r"\s?\[(\d+(?:\s*[,;]\s*\d+)*)\]")


@dataclass
class AskRequest:
    question: str
    access: Access
    collections: list[str] = field(default_factory=list)
    filters: SearchFilters | None = None
    conversation: str | uuid.UUID | None = None  # a follow-up: the conversation it continues
    budget: int | None = None  # tokens of passages; None: PMD_ANSWER_BUDGET
    record: bool = True


@dataclass
class Passage:
    number: int
    collection: str
    path: str
    title: str
    line: int
    score: float
    text: str
    tokens: int

    @property
    def uri(self) -> str:
        return f"pmd://{self.collection}/{self.path}"

    @property
    def source(self) -> str:
        return f"{self.uri}:{self.line}"

    def as_dict(self, *, text: bool = True) -> dict:
        data = {
            "number": self.number,
            "collection": self.collection,
            "path": self.path,
            "title": self.title,
            "line": self.line,
            "score": round(self.score, 4),
            "uri": self.uri,
            "source": self.source,
            "tokens": self.tokens,
        }
        if text:
            data["text"] = self.text
        return data


@dataclass
class AskAnswer:
    question: str
    text: str = ""
    state: str = Answer.State.ANSWERED
    passages: list[Passage] = field(default_factory=list)
    cited: list[int] = field(default_factory=list)
    flags: list[dict] = field(default_factory=list)
    nearest: list[dict] = field(default_factory=list)  # when the notes do not cover the question
    model: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    timings: dict[str, float] = field(default_factory=dict)  # retrieval, prompt, first_token, total (ms)
    conversation: str = ""
    id: int | None = None

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "conversation": self.conversation,
            "question": self.question,
            "answer": self.text,
            "state": self.state,
            "passages": [p.as_dict() for p in self.passages],
            "cited": list(self.cited),
            "flags": list(self.flags),
            "nearest": list(self.nearest),
            "model": self.model,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "timings_ms": {k: round(v, 2) for k, v in self.timings.items()},
        }


@dataclass
class AskEvent:
    """What a streaming face sends: `passages` (before the model writes), `token` (text as it is
    written), `done` (the checked answer)."""

    kind: str
    text: str = ""
    passages: list[Passage] = field(default_factory=list)
    answer: AskAnswer | None = None


def answer_model() -> str:
    """The configured chat model, or AnswerModelUnset (Ask off, search unchanged)."""
    model = (settings.PMD_ANSWER_MODEL or "").strip()
    if not model or model.lower() == "none":
        raise AnswerModelUnset()
    return model


def ask_run(request: AskRequest) -> AskAnswer:
    """The whole answer at once (the non-streaming faces)."""
    answer = None
    for event in ask_stream(request):
        if event.kind == "done":
            answer = event.answer
    assert answer is not None
    return answer


def ask_stream(request: AskRequest, *, cancelled: Callable[[], bool] | None = None) -> Iterator[AskEvent]:
    """The answer as it is written. Closing this iterator (the reader left) or `cancelled()`
    turning true stops the model and records the answer as cancelled."""
    started = time.perf_counter()
    user = request.access.user
    ask_rate_check(user=user)
    model = answer_model()
    question = (request.question or "").strip()
    conversation, history = _conversation(request, question)
    retrieval_query = " ".join([*(a.question for a in history[-1:]), question])
    response = search_run(
        SearchRequest(
            query=retrieval_query,
            mode=Mode.HYBRID,
            limit=settings.PMD_ANSWER_PASSAGES,
            access=request.access,
            collections=list(request.collections),
            filters=request.filters,
            hits_per_document=2,
        )
    )
    answer = AskAnswer(question=question, conversation=str(conversation), model=model)
    answer.timings["retrieval"] = (time.perf_counter() - started) * 1000
    results = response.results

    def finish() -> AskEvent:
        answer.timings["total"] = (time.perf_counter() - started) * 1000
        if request.record:
            answer.id = _record(request, answer, user).id
        return AskEvent("done", answer=answer)

    if not results or results[0].score < settings.PMD_ANSWER_MIN_SCORE:
        answer.state = Answer.State.REFUSED
        answer.model = ""
        answer.nearest = [_nearest(r) for r in results[:NEAREST]]
        answer.text = NOT_COVERED + (" The nearest notes are listed below." if results else "")
        yield AskEvent("passages")
        yield AskEvent("token", text=answer.text)
        yield finish()
        return

    answer.passages = passages_pack(results, budget=request.budget or settings.PMD_ANSWER_BUDGET)
    yield AskEvent("passages", passages=answer.passages)
    messages = _messages(question, answer.passages, history, request.access)
    deadline = started + settings.PMD_ANSWER_TIMEOUT
    written: list[str] = []
    backend = get_backend(timeout=settings.PMD_ANSWER_TIMEOUT, retries=0)
    answer.timings["prompt"] = (time.perf_counter() - started) * 1000  # pmd's part before the model's
    try:
        with closing(backend.chat_stream(messages, model=model, options={"temperature": 0.1}, think=False)) as stream:
            for delta in stream:
                if delta.done:
                    answer.tokens_in, answer.tokens_out = delta.tokens_in, delta.tokens_out
                    answer.model = delta.model or model
                    break
                if delta.content:
                    if "first_token" not in answer.timings:
                        answer.timings["first_token"] = (time.perf_counter() - started) * 1000
                    written.append(delta.content)
                    yield AskEvent("token", text=delta.content)
                if cancelled is not None and cancelled():
                    answer.state = Answer.State.CANCELLED
                    break
                if time.perf_counter() > deadline:
                    answer.state = Answer.State.CUT_SHORT
                    break
    except GeneratorExit:  # the reader left: the stream above is closed, the model stops
        answer.state = Answer.State.CANCELLED
        answer.text = "".join(written)
        finish()
        raise
    except LLMBackendTimeout:
        answer.state = Answer.State.CUT_SHORT
    except LLMBackendError as exc:
        answer.state = Answer.State.FAILED
        answer.flags.append({"code": "model_failed", "message": exc.message})
    answer.text, answer.cited, flags = citations_check("".join(written), len(answer.passages))
    answer.flags.extend(flags)
    if answer.state == Answer.State.CUT_SHORT:
        answer.flags.append({"code": "deadline", "message": f"stopped after {settings.PMD_ANSWER_TIMEOUT:g} s"})
    yield finish()


def ask_open(request: AskRequest, *, cancelled: Callable[[], bool] | None = None) -> Iterator[AskEvent]:
    """`ask_stream` with its first step taken: the request's errors (throttled, no model, unknown
    collection) are raised here, before a streaming face has sent its first byte."""
    stream = ask_stream(request, cancelled=cancelled)
    first = next(stream)

    def rest() -> Iterator[AskEvent]:
        yield first
        yield from stream  # closing this closes the stream, which closes the model's

    return rest()


def citations_check(text: str, given: int) -> tuple[str, list[int], list[dict]]:
    """The answer with only citations of the `given` passages (1..given), the numbers cited, and
    what was wrong: a citation of a passage not given is removed and flagged; no valid citation
    at all is flagged and said in the answer."""
    cited: list[int] = []
    flags: list[dict] = []

    def keep(match: re.Match) -> str:
        numbers = [int(n) for n in re.findall(r"\d+", match.group(1))]
        valid = [n for n in numbers if 1 <= n <= given]
        for n in numbers:
            if n not in valid:
                flags.append(
                    {
                        "code": "invented_citation",
                        "number": n,
                        "message": f"[{n}] names no passage the model was given: removed",
                    }
                )
        cited.extend(n for n in valid if n not in cited)
        if not valid:
            return ""
        return match.group(0)[: len(match.group(0)) - len(match.group(0).lstrip())] + "".join(f"[{n}]" for n in valid)

    checked = _CITATION.sub(keep, text).strip()
    if checked and not cited:
        flags.append({"code": "uncited", "message": UNCITED})
        checked = f"{checked}\n\n{UNCITED}"
    return checked, cited, flags


def passages_pack(results: list[SearchResult], *, budget: int) -> list[Passage]:
    """The best passages that fit in `budget` tokens, in the hits' order: each hit's section (from the
    heading above its line to the next heading, as the keyword index cut it), cut to a third of the
    budget around the line so that one long section never fills it alone, the same section once; a
    passage that does not fit is left out and smaller later ones still go in. One query for the
    sections' characters, string work after: no chunking, no whole bodies."""
    room = max(50, budget - PROMPT_RESERVE)
    cap = max(50, room // 3)
    sections = sections_at(places=[(r.collection, r.path, r.line) for r in results])
    seen: set[tuple[str, str, int]] = set()
    passages: list[Passage] = []
    used = 0
    for result, section in zip(results, sections):
        if section is None:
            text, start, tokens = result.snippet, result.line, count_tokens(result.snippet)
        else:  # counting stops once the passage cannot fit in what is left (text None)
            text, start, tokens = _section_around(section, result.line, cap, limit=max(0, room - used - 12))
        if (result.collection, result.path, start) in seen or (text is not None and not text.strip()):
            continue
        seen.add((result.collection, result.path, start))
        if text is None:
            continue
        tokens += 12  # and its header line
        if used + tokens > room:
            continue
        used += tokens
        passages.append(
            Passage(
                number=len(passages) + 1,
                collection=result.collection,
                path=result.path,
                title=result.title,
                line=result.line,
                score=result.score,
                text=text.strip(),
                tokens=tokens,
            )
        )
    return passages


def _section_around(section: SectionText, line: int, cap: int, *, limit: int) -> tuple[str | None, int, int]:
    """The part of `section` around `line` (of the document) within about `cap` tokens, the line
    it starts at and its tokens; a piece of a long section gets its section's heading on top."""
    lines = section.text.splitlines()
    offset = section.first_line
    if section.heading:
        lines.insert(0, section.heading)
        offset -= 1
    text, start, tokens = _section_at(lines, line - offset + 1, cap, limit=limit)
    return text, start + offset - 1, tokens


def _section_at(lines: list[str], line: int, cap: int, *, limit: int | None = None) -> tuple[str | None, int, int]:
    """The section holding `line` (1-based) as text within about `cap` tokens, its first line and
    its tokens; text None as soon as it has more than `limit` tokens (it would not fit: counting
    the rest of a long section is most of packing's time)."""
    hit = max(0, min(line - 1, len(lines) - 1)) if lines else 0
    start = hit
    while start > 0 and not lines[start].startswith("#"):
        start -= 1
    kept: list[str] = []
    total = tokens = 0  # tokens with one per line break (the cap), and without (the text's count)
    first = start
    if hit - start > 8:  # a long section: start near the hit, keep its heading
        kept.append(lines[start])
        tokens = count_tokens(lines[start])
        total = tokens + 1
        first = max(start + 1, hit - 3)
    for index in range(first, len(lines)):
        text = lines[index]
        if index > start and index > hit and text.startswith("#"):
            break
        cost = count_tokens(text)
        if total + cost + 1 > cap:
            if index <= hit or not kept:
                kept.append(text[: cap * 4])
                tokens += count_tokens(kept[-1])
            break
        kept.append(text)
        total += cost + 1
        tokens += cost
        if limit is not None and tokens > limit:
            return None, start + 1, tokens
    if limit is not None and tokens > limit:
        return None, start + 1, tokens
    return "\n".join(kept), start + 1, tokens


def _conversation(request: AskRequest, question: str) -> tuple[uuid.UUID, list[Answer]]:
    """The conversation this question belongs to and its earlier answers (a follow-up's context)."""
    if not request.conversation:
        return uuid.uuid4(), []
    try:
        conversation = uuid.UUID(str(request.conversation))
    except ValueError:
        raise ConversationNotFound(f"no conversation {request.conversation} of yours") from None
    return conversation, conversation_answers(access=request.access, conversation=conversation)


def _messages(question: str, passages: list[Passage], history: list[Answer], access: Access) -> list[dict]:
    messages = [{"role": "system", "content": INSTRUCTIONS}]
    visible = _visible_names(access)
    for previous in history[-1:]:
        messages.append({"role": "user", "content": previous.question})
        # The earlier answer is context only while every note it drew on is still visible to the asker.
        if previous.text and all(p.get("collection") in visible for p in previous.passages):
            messages.append({"role": "assistant", "content": _CITATION.sub("", previous.text)})
    notes = "\n\n".join(f"[{p.number}] {p.source} {p.title}\n{p.text}" for p in passages)
    messages.append({"role": "user", "content": f"Passages:\n{notes}\n\nQuestion: {question}"})
    return messages


def _visible_names(access: Access) -> set[str]:
    return set(visible_collection_names(access))


def _nearest(result: SearchResult) -> dict:
    return {
        "collection": result.collection,
        "path": result.path,
        "title": result.title,
        "line": result.line,
        "score": round(result.score, 4),
        "uri": result.uri,
    }


def answer_from_record(row: Answer) -> AskAnswer:
    """A recorded answer as the asker sees it again (its passages without their text)."""
    return AskAnswer(
        question=row.question,
        text=row.text,
        state=row.state,
        model=row.model,
        cited=list(row.cited),
        passages=[
            Passage(
                number=p["number"],
                collection=p["collection"],
                path=p["path"],
                title=p["title"],
                line=p["line"],
                score=p["score"],
                text="",
                tokens=p["tokens"],
            )
            for p in row.passages
        ],
        flags=list(row.flags),
        tokens_in=row.tokens_in,
        tokens_out=row.tokens_out,
        timings={
            k: v
            for k, v in (("retrieval", row.retrieval_ms), ("first_token", row.first_token_ms), ("total", row.total_ms))
            if v is not None
        },
        conversation=str(row.conversation),
        id=row.id,
    )


def _record(request: AskRequest, answer: AskAnswer, user) -> Answer:
    return answer_record(
        user=user,
        conversation=answer.conversation,
        question=answer.question,
        text=answer.text,
        state=answer.state,
        model=answer.model,
        tokens_in=answer.tokens_in,
        tokens_out=answer.tokens_out,
        passages=[p.as_dict(text=False) for p in answer.passages],
        cited=answer.cited,
        flags=answer.flags,
        retrieval_ms=answer.timings.get("retrieval", 0.0),
        first_token_ms=answer.timings.get("first_token"),
        total_ms=answer.timings.get("total", 0.0),
    )
