"""Re-ranking: a relevance judgement of each (query, best chunk) pair by an LLM.

Retrievers score a query and a document independently; a re-ranker reads both
together, like a cross-encoder, and so catches what neither retriever sees
(negation, the question actually asked). pmd uses Qwen3-Reranker through the
generate backend: the model answers "yes" or "no" to "does this document meet
the query?", and the probability it gives "yes" (from the token log-probabilities,
normalised against "no") is the confidence, 0..1.

Backends that return no log-probabilities get a second prompt instead: rate the
document 0-10, parsed defensively and divided by 10. Which method a backend needs
is learnt on the first judgement and remembered for the process.

Servers built for re-ranking (llama.cpp `--reranking`, vLLM, Infinity, Jina, Cohere: `/v1/rerank`;
Hugging Face TEI: `/rerank`) and the local backend's cross-encoder score every candidate
of a batch in one call instead: PMD_RERANK_API=rerank|tei|chat picks the method, `auto`
(the default) tries `/v1/rerank`, then TEI's `/rerank`, then chat, on servers other than
Ollama (which has no rerank endpoint), and remembers what answered.

Judgements run concurrently, are cached per (query, intent, chunk hash, model,
method) in the LLM cache, and stop at a deadline: whatever was judged by then is
used, the rest keeps its retrieval order (see `fusion.blend`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from dataclasses import dataclass, field

from indexing.errors import LLMBackendError, LLMBackendTimeout, LLMEndpointMissing, LLMModelMissing
from indexing.llm import TokenLogprob
from indexing.models import LLMCache
from search.pipeline.deadline import run_concurrently

LOGPROBS, RATING = "logprobs", "rating"
RERANK_API, TEI, CROSS_ENCODER = "rerank", "tei", "local"  # one request scores a batch
BATCH_METHODS = (RERANK_API, TEI, CROSS_ENCODER)
MAX_DOCUMENT_CHARS = 4000  # a chunk is ~900 tokens; more only slows the judgement
DEFAULT_INSTRUCTION = "Given a search query, judge whether the document is relevant and helps answer it"

# The reranker was trained with exactly this system prompt and user layout.
JUDGE_SYSTEM = (
    "Judge whether the Document meets the requirements based on the Query and the Instruct provided. "
    'Note that the answer can only be "yes" or "no".'
)
RATING_SYSTEM = "You grade how relevant a document is to a search query. Answer with JSON only."
RATING_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "integer", "minimum": 0, "maximum": 10}},
    "required": ["score"],
}

_methods: dict[tuple[str, str], str] = {}  # (backend url, model) → method that works
_methods_lock = threading.Lock()


@dataclass
class RerankItem:
    key: str  # what fusion calls the candidate
    text: str  # the chunk the re-ranker reads

    @property
    def chunk_hash(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@dataclass
class RerankOutcome:
    scores: dict[str, float] = field(default_factory=dict)  # key → confidence 0..1
    cached: int = 0
    judged: int = 0
    failed: int = 0
    unjudged: int = 0  # left out by the deadline (or after a fatal error)
    method: str = ""
    error: str = ""  # fatal: server down, model missing
    model_missing: bool = False  # the fatal error is that the server lacks the model
    warnings: list[str] = field(default_factory=list)


# --- prompts -------------------------------------------------------------------------------


def instruction_for(intent: str | None) -> str:
    if intent and intent.strip():
        return f"{DEFAULT_INSTRUCTION}. What the searcher means: {intent.strip()}"
    return DEFAULT_INSTRUCTION


def judge_messages(query: str, document: str, *, intent: str | None = None) -> list[dict]:
    user = f"<Instruct>: {instruction_for(intent)}\n<Query>: {query}\n<Document>: {document[:MAX_DOCUMENT_CHARS]}"
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def rating_messages(query: str, document: str, *, intent: str | None = None) -> list[dict]:
    context = f"\nWhat the searcher means: {intent.strip()}" if intent and intent.strip() else ""
    user = (
        f"Search query: {query}{context}\n\nDocument:\n{document[:MAX_DOCUMENT_CHARS]}\n\n"
        "How relevant is the document to the query, from 0 (unrelated) to 10 (answers it exactly)? "
        'Answer as JSON: {"score": N}'
    )
    return [{"role": "system", "content": RATING_SYSTEM}, {"role": "user", "content": user}]


# --- parsing --------------------------------------------------------------------------------

_THINK = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)


def _answer_word(token: str) -> str:
    return token.strip().strip(".,!\"'`*").casefold()


def _logsumexp(values: list[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def confidence_from_logprobs(logprobs: list[TokenLogprob]) -> float | None:
    """P(yes) / (P(yes) + P(no)) at the first answer token; None when it cannot tell.

    Skips leading tokens that are not an answer (whitespace, an empty thinking block).
    Variants of a word ("yes", " Yes") are pooled. With only one of the two words
    among the alternatives, its own probability stands for the split.
    """
    for entry in logprobs:
        alternatives = [(entry.token, entry.logprob), *entry.top]
        words = {_answer_word(token) for token, _ in alternatives}
        if not words & {"yes", "no"}:
            if _answer_word(entry.token) in {"", "<think>", "</think>", "think"}:
                continue
            return None  # the model answered something else entirely
        seen: set[tuple[str, float]] = set()
        yes, no = [], []
        for token, logprob in alternatives:
            if (token, logprob) in seen or not math.isfinite(logprob):
                continue
            seen.add((token, logprob))
            word = _answer_word(token)
            if word == "yes":
                yes.append(logprob)
            elif word == "no":
                no.append(logprob)
        if yes and no:
            y, n = _logsumexp(yes), _logsumexp(no)
            return 1.0 / (1.0 + math.exp(n - y))
        if yes:
            return min(1.0, math.exp(_logsumexp(yes)))
        if no:
            return max(0.0, 1.0 - math.exp(_logsumexp(no)))
    return None


def confidence_from_text(content: str) -> float | None:
    """A bare yes/no answer without probabilities: 1.0 / 0.0 (None if neither)."""
    words = re.findall(r"[a-z]+", _THINK.sub("", content or "").casefold())
    if not words:
        return None
    return {"yes": 1.0, "no": 0.0}.get(words[0])


_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(\s*/\s*(10|100)\b)?")


def parse_rating(content: str) -> float | None:
    """A 0-10 rating from the model's answer, as 0..1; None when there is none."""
    text = _THINK.sub("", content or "").strip()
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if data is None:
        start = text.find("{")
        if start >= 0:
            try:
                data, _ = json.JSONDecoder().raw_decode(text, start)
            except ValueError:
                data = None
    if isinstance(data, dict):
        for name in ("score", "rating", "relevance", "value"):
            value = data.get(name)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                return _scaled(float(value), 10.0)
            if isinstance(value, str):
                return parse_rating(value)
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        return _scaled(float(data), 10.0)
    match = _NUMBER.search(text)
    if not match:
        return None
    scale = float(match.group(3)) if match.group(3) else 10.0
    return _scaled(float(match.group(1)), scale)


def _scaled(value: float, scale: float) -> float | None:
    if not math.isfinite(value) or value < 0 or value > scale:
        return None
    return value / scale


# --- judging -------------------------------------------------------------------------------


def rerank_cache_key(*, query: str, intent: str | None, chunk_hash: str, model: str, method: str) -> str:
    raw = "\x00".join(["rerank-v1", model, method, query.strip(), (intent or "").strip(), chunk_hash])
    return hashlib.sha256(raw.encode()).hexdigest()


def known_method(backend, model: str) -> str | None:
    with _methods_lock:
        return _methods.get((getattr(backend, "base_url", repr(backend)), model))


def _remember_method(backend, model: str, method: str) -> None:
    with _methods_lock:
        _methods[(getattr(backend, "base_url", repr(backend)), model)] = method


def judge(*, backend, model: str, query: str, document: str, intent: str | None = None) -> tuple[float, str]:
    """One relevance judgement → (confidence 0..1, method). HTTP only: safe in a thread.

    Raises LLMBackendError when the backend fails, ValueError when the answer is unusable.
    """
    method = known_method(backend, model)
    if method != RATING:
        answer = backend.chat(
            judge_messages(query, document, intent=intent),
            model=model,
            logprobs=True,
            top_logprobs=5,
            options={"temperature": 0, "num_predict": 1},
            think=False,
        )
        if answer.logprobs:
            _remember_method(backend, model, LOGPROBS)
            confidence = confidence_from_logprobs(answer.logprobs)
            if confidence is None:
                confidence = confidence_from_text(answer.content)
            if confidence is None:
                raise ValueError(f"the re-ranker answered neither yes nor no: {answer.content[:80]!r}")
            return confidence, LOGPROBS
        _remember_method(backend, model, RATING)  # no log-probabilities from this backend
    answer = backend.chat(
        rating_messages(query, document, intent=intent),
        model=model,
        format=RATING_SCHEMA,
        options={"temperature": 0, "num_predict": 20},
        think=False,
    )
    rating = parse_rating(answer.content)
    if rating is None:
        raise ValueError(f"the re-ranker gave no 0-10 rating: {answer.content[:80]!r}")
    return rating, RATING


def first_method(backend, model: str, api: str = "auto") -> str:
    """The method to try first: what answered before, what PMD_RERANK_API says, or a guess."""
    known = known_method(backend, model)
    if known:
        return known
    if getattr(backend, "kind", "") == "local":
        return CROSS_ENCODER
    if api == "chat":
        return LOGPROBS
    if api in (RERANK_API, TEI):
        return api
    return LOGPROBS if getattr(backend, "kind", "") == "ollama" else RERANK_API


def describe_method(backend, model: str, api: str = "auto") -> str:
    """How `model` re-ranks, in words (`pmd models list`): learnt, configured or guessed."""
    method = first_method(backend, model, api)
    known = known_method(backend, model) is not None
    words = {
        CROSS_ENCODER: "cross-encoder in this process",
        RERANK_API: "POST /v1/rerank",
        TEI: "POST /rerank (TEI)",
        LOGPROBS: "chat: yes/no log-probabilities",
        RATING: "chat: 0-10 rating",
    }[method]
    if not known and api == "auto" and method == RERANK_API:
        return "auto: /v1/rerank, else TEI /rerank, else chat"
    return words


def score_batch(
    *, backend, model: str, query: str, documents: list[str], method: str, api: str = "auto"
) -> tuple[list[float], str]:
    """Scores of a batch from a rerank endpoint (or the local cross-encoder) → (scores, method).

    In `auto` mode a server without `/v1/rerank` is asked TEI's `/rerank`; LLMEndpointMissing
    from both means the server only chats (the caller falls back to judging one by one)."""
    documents = [d[:MAX_DOCUMENT_CHARS] for d in documents]
    order = [method] + ([TEI] if api == "auto" and method == RERANK_API else [])
    for index, candidate in enumerate(order):
        try:
            scores = backend.rerank(query, documents, model=model, api=candidate)
        except LLMEndpointMissing:
            if index + 1 < len(order):
                continue
            raise
        _remember_method(backend, model, candidate)
        return scores, candidate
    raise AssertionError("unreachable")


def _fatal(_name: str, error: BaseException) -> bool:
    """Errors that every further judgement would repeat (down, model missing, no such
    endpoint): stop at the first. A timeout or an unusable answer concerns one item."""
    return isinstance(error, LLMBackendError) and not isinstance(error, LLMBackendTimeout)


def rerank(
    *,
    backend,
    model: str,
    query: str,
    items: list[RerankItem],
    intent: str | None = None,
    timeout: float = 15.0,
    concurrency: int = 4,
    use_cache: bool = True,
    api: str = "auto",
    batch: int = 32,
) -> RerankOutcome:
    """Judge every item (cache first), concurrently, until `timeout` seconds have passed.

    Must run in a thread that may use the database (the cache); the judgements
    themselves run in worker threads that only speak HTTP.
    """
    outcome = RerankOutcome()
    if not items:
        return outcome
    method = first_method(backend, model, api)
    keys = {
        item.key: rerank_cache_key(query=query, intent=intent, chunk_hash=item.chunk_hash, model=model, method=method)
        for item in items
    }
    if use_cache:
        cached = {
            entry.key: entry.value for entry in LLMCache.objects.filter(key__in=list(keys.values()), kind="rerank")
        }
        for item in items:
            value = cached.get(keys[item.key])
            if isinstance(value, dict) and isinstance(value.get("score"), (int, float)):
                outcome.scores[item.key] = float(value["score"])
                outcome.cached += 1
    todo = [item for item in items if item.key not in outcome.scores]
    if method in BATCH_METHODS and todo:
        fell_back = _rerank_in_batches(
            outcome,
            backend=backend,
            model=model,
            query=query,
            intent=intent,
            todo=todo,
            method=method,
            api=api,
            timeout=timeout,
            concurrency=concurrency,
            batch=batch,
            use_cache=use_cache,
            total=len(items),
        )
        if not fell_back:
            return outcome
        method = LOGPROBS  # the server only chats: judge one by one below
        keys = {
            item.key: rerank_cache_key(
                query=query, intent=intent, chunk_hash=item.chunk_hash, model=model, method=method
            )
            for item in todo
        }
    calls = {
        item.key: (
            lambda item=item: judge(backend=backend, model=model, query=query, document=item.text, intent=intent)
        )
        for item in todo
    }
    result = run_concurrently(calls, timeout=timeout, workers=concurrency, stop_on=_fatal)
    fresh = []
    for key, (confidence, used) in result.results.items():
        outcome.scores[key] = confidence
        outcome.judged += 1
        outcome.method = used
        if used != method:  # learnt on the way: store under the key of the method used
            item = next(i for i in todo if i.key == key)
            cache_key = rerank_cache_key(
                query=query, intent=intent, chunk_hash=item.chunk_hash, model=model, method=used
            )
        else:
            cache_key = keys[key]
        fresh.append(LLMCache(key=cache_key, kind="rerank", value={"score": confidence, "method": used}))
    if fresh and use_cache:
        LLMCache.objects.bulk_create(fresh, ignore_conflicts=True)
    _tell(
        outcome,
        result,
        method=method,
        failed=len(result.errors),
        unjudged=len(result.timed_out),
        total=len(items),
        timeout=timeout,
    )
    return outcome


def _tell(
    outcome: RerankOutcome, result, *, method: str, failed: int, unjudged: int, total: int, timeout: float
) -> None:
    """What went wrong, once for both ways of judging: an error that every judgement would repeat
    (the caller states it), or warnings about the candidates left in retrieval order."""
    outcome.method = outcome.method or (method if outcome.cached else "")
    outcome.failed = failed
    outcome.unjudged = unjudged
    fatal = next((e for e in result.errors.values() if _fatal("", e)), None)
    if fatal is not None:
        outcome.error = str(fatal)  # no point listing the other symptoms
        outcome.model_missing = isinstance(fatal, LLMModelMissing)
    elif result.errors:
        first = next(iter(result.errors.values()))
        reason = str(first) if isinstance(first, (LLMBackendError, ValueError)) else f"{type(first).__name__}: {first}"
        outcome.warnings.append(f"re-ranking failed for {failed} of {total} candidates ({reason})")
    if result.timed_out and fatal is None:
        outcome.warnings.append(
            f"re-ranking stopped after {timeout:g}s: {total - unjudged} of {total} "
            "candidates judged, the rest keep their retrieval order"
        )


def _rerank_in_batches(
    outcome: RerankOutcome,
    *,
    backend,
    model,
    query,
    intent,
    todo,
    method,
    api,
    timeout,
    concurrency,
    batch,
    use_cache,
    total,
) -> bool:
    """Score `todo` a batch per request; True when the server has no rerank endpoint after
    all (auto mode) and the chat judgement should take over."""
    batches = [todo[start : start + max(1, batch)] for start in range(0, len(todo), max(1, batch))]
    calls = {
        str(number): (
            lambda part=part: score_batch(
                backend=backend,
                model=model,
                query=query,
                documents=[item.text for item in part],
                method=method,
                api=api,
            )
        )
        for number, part in enumerate(batches)
    }
    result = run_concurrently(calls, timeout=timeout, workers=concurrency, stop_on=_fatal)
    if (
        api == "auto"
        and method == RERANK_API
        and not result.results
        and result.errors
        and all(isinstance(e, LLMEndpointMissing) for e in result.errors.values())
    ):
        _remember_method(backend, model, LOGPROBS)
        return True
    fresh = []
    for number, (scores, used) in result.results.items():
        outcome.method = used
        for item, score in zip(batches[int(number)], scores):
            outcome.scores[item.key] = score
            outcome.judged += 1
            key = rerank_cache_key(query=query, intent=intent, chunk_hash=item.chunk_hash, model=model, method=used)
            fresh.append(LLMCache(key=key, kind="rerank", value={"score": score, "method": used}))
    if fresh and use_cache:
        LLMCache.objects.bulk_create(fresh, ignore_conflicts=True)
    _tell(
        outcome,
        result,
        method=method,
        failed=sum(len(batches[int(n)]) for n in result.errors),
        unjudged=sum(len(batches[int(n)]) for n in result.timed_out),
        total=total,
        timeout=timeout,
    )
    return False
