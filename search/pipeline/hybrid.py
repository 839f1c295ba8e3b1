"""`pmd query`: hybrid search, the one service the CLI, web UI, JSON API and MCP call.

Pipeline (each stage timed in `SearchResponse.timings`, each shortfall stated in
`SearchResponse.warnings`):

1. keyword search for the query; when its top hit clearly dominates (shown score, the
   share of the query its best passage holds, ≥ 0.85 and ≥ 0.15 ahead of #2) the query is
   a lookup: expansion is skipped and that hit stays first after fusion;
2. query expansion by the generate model (or the user's own `lex:/vec:/hyde:` lines);
3. retrieval, concurrently: the query → keyword + vector, lex → keyword, vec/hyde → vector;
4. query-adaptive score fusion (`search.pipeline.fusion`: z-scores per list, keyword and
   vector weighted per query by each list's NQC), optionally nudged by link neighbours and
   recency (`search.pipeline.signals`, off by default), top `candidate_limit` kept;
5. re-ranking of each candidate's best chunk (`search.pipeline.rerank`);
6. position-aware blending of retrieval and re-ranker scores.

Degradation: no generate model → no expansion; no re-ranker → fusion order; LLM
server down → keyword results; everything bounded by PMD_QUERY_TIMEOUT, so a
slow or absent model costs seconds, never a hang.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Q

from indexing.chunking import chunk_markdown
from indexing.errors import InvalidSearchInput, LLMBackendTimeout, LLMBackendUnavailable, LLMModelMissing
from indexing.language import latin_share, query_language
from indexing.llm import get_backend, rerank_backend
from indexing.llm.prompts import model_is_english_only
from indexing.markdown import searchable_text
from indexing.models import Document
from indexing.services.embedding import chunk_params_from_settings
from search.pipeline.absent import model_absent, remember_absent
from search.pipeline.deadline import run_concurrently
from search.pipeline.expansion import (
    HYDE,
    LEX,
    VEC,
    QueryPlan,
    QueryVariant,
    cached_expansion,
    expansion_cache_key,
    parse_query_document,
    request_expansion,
    store_expansion,
    user_plan,
)
from search.pipeline.fusion import (
    FUSION_DEPTH,
    KEYWORD,
    ORIGINAL_WEIGHT,
    VARIANT_WEIGHT,
    VECTOR,
    Blended,
    Fusion,
    RankedList,
    blend,
    fuse,
    vector_trust,
)
from search.pipeline.rerank import RerankItem, rerank
from search.pipeline.signals import apply_signals, signal_weights
from search.request import Mode, SearchRequest
from search.results import SearchResponse, SearchResult
from search.retrieval.common import (
    collection_ids_for,
    complete_snippets,
    request_access,
)
from search.retrieval.keyword import keyword_search
from search.retrieval.vector import vector_search

STRONG_SCORE = 0.85
STRONG_GAP = 0.15
MIN_DEPTH = FUSION_DEPTH  # results asked of each retriever, at least: fusion's statistics need them
DISABLED = {"", "none", "off", "false", "0", "-"}
LEAD = "original/keyword"  # the keyword search of the query itself


# --- configuration ---------------------------------------------------------------------------


def generate_model() -> str | None:
    model = str(settings.PMD_GENERATE_MODEL or "").strip()
    return None if model.lower() in DISABLED else model


def rerank_model() -> str | None:
    model = str(settings.PMD_RERANK_MODEL or "").strip()
    return None if model.lower() in DISABLED else model


def pipeline_backend(timeout: float):
    """A backend client for expansion and re-ranking with a per-request timeout that fits
    the query deadline and at most one retry: a user is waiting, unlike a bulk embed."""
    return get_backend(timeout=float(math.ceil(timeout)), retries=min(1, int(settings.PMD_LLM_RETRIES)))


# --- the pipeline ----------------------------------------------------------------------------


@dataclass
class _Run:
    request: SearchRequest
    started: float
    deadline: float
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    llm_down: str = ""  # the error that showed the LLM server is unreachable
    off: list[str] = field(default_factory=list)  # stages off by configuration: --explain only, no warning

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def warn(self, message: str) -> None:
        if message and message not in self.warnings:
            self.warnings.append(message)

    def timed(self, stage: str, since: float) -> None:
        self.timings[stage] = self.timings.get(stage, 0.0) + (time.monotonic() - since) * 1000.0


def hybrid_search(request: SearchRequest) -> SearchResponse:
    """The best-quality search: expansion, fusion, re-ranking and blending, degrading
    gracefully (and saying so) when a model is missing, slow or unreachable."""
    started = time.monotonic()
    run = _Run(request=request, started=started, deadline=started + float(settings.PMD_QUERY_TIMEOUT))
    plan = _plan(run)
    intent = (request.intent or "").strip() or plan.intent
    plan.intent = intent
    depth = max(MIN_DEPTH, request.candidate_limit, request.effective_limit())
    depth = min(depth, 1000)

    lists: list[RankedList] = []
    hits: dict[str, dict[str, SearchResult]] = {}  # list name → key → result (for display and explain)
    explain_plan: dict = {
        "source": plan.source,
        "variants": [v.as_dict() for v in plan.variants],
        "intent": intent,
        "strong_signal": False,
        "off": run.off,
    }

    def after_keyword(response: SearchResponse) -> None:
        # 2. expansion, unless the user wrote the variants or keyword search already nailed it
        if plan.source == "none":
            if strong_signal(response.results):
                explain_plan["strong_signal"] = True
            elif request.expand:
                plan.variants, source = _expand(run, plan.original, intent)
                plan.source = source if plan.variants else plan.source
                explain_plan.update(source=plan.source, variants=[v.as_dict() for v in plan.variants])

    # 1. keyword search for the query itself: cheap, and tells whether expansion is worth it.
    # When no expansion can follow (the user wrote the variants, expansion is off or has no
    # model), nothing waits on it: it runs alongside the other retrievals.
    keyword_first = None
    expander = generate_model()
    may_expand = (
        plan.source == "none"
        and request.expand
        and expander is not None
        and model_absent("expansion", expander) is None
    )
    if plan.original and may_expand:
        since = time.monotonic()
        keyword_first = _keyword(_sub_request(request, plan.original, Mode.KEYWORD, depth))
        run.timed("keyword", since)
        _add_list(lists, hits, "original/keyword", keyword_first, ORIGINAL_WEIGHT)
        for message in keyword_first.warnings:
            run.warn(message)
        after_keyword(keyword_first)

    # 3. the remaining retrievals, concurrently
    since = time.monotonic()
    lead = _retrieve(run, plan, depth, lists, hits, lead=after_keyword if plan.original and not may_expand else None)
    keyword_first = keyword_first or lead
    run.timed("retrieve", since)

    # 4. fusion
    since = time.monotonic()
    pin = None
    if explain_plan["strong_signal"] and keyword_first is not None and keyword_first.results:
        pin = keyword_first.results[0].uri  # keyword alone was convincing: its #1 stays first
    own_words = plan.original or request.query
    trust = vector_trust(
        query_language(own_words),
        latin_share=latin_share(own_words),
        english_only_model=model_is_english_only(settings.PMD_EMBED_MODEL),
    )
    fusion = fuse(lists, limit=None, pin=pin, trust=trust)
    link_weight, recency_weight = signal_weights(request)
    if link_weight or recency_weight:  # optional structure signals (search.pipeline.signals)
        boosted = apply_signals(fusion, hits, link_boost=link_weight, recency_boost=recency_weight)
        explain_plan["signals"] = {"link_boost": link_weight, "recency_boost": recency_weight, "boosted": len(boosted)}
    fused = fusion.candidates
    candidates = fused[: max(1, request.candidate_limit)]
    tail = fused[len(candidates) :]
    run.timed("fusion", since)

    # 5. re-ranking
    scores: dict[str, float] = {}
    rerank_info: dict = {"model": None, "method": None}
    if candidates and request.rerank:
        scores, rerank_info = _rerank(run, plan, candidates, hits)

    # 6. blending
    since = time.monotonic()
    blended = blend(fusion, candidates, scores)
    results = _results(run, fusion, blended, tail, hits, explain_plan, rerank_info)
    run.timed("blend", since)

    results = [r for r in results if r.score >= request.min_score][: request.effective_limit()]
    complete_snippets(results)
    if request.full:
        _attach_bodies(results)
    run.timings["total"] = (time.monotonic() - started) * 1000.0
    return SearchResponse(
        query=request.query, mode=Mode.HYBRID, results=results, warnings=run.warnings, timings=run.timings
    )


def strong_signal(results: list[SearchResult]) -> bool:
    """Keyword search alone is convincing: a clear, high-scoring winner."""
    if not results:
        return False
    top = results[0].scores.get("share", results[0].score)
    second = results[1].scores.get("share", results[1].score) if len(results) > 1 else 0.0
    return top >= STRONG_SCORE and top - second >= STRONG_GAP


# --- stages ----------------------------------------------------------------------------------


def _plan(run: _Run) -> QueryPlan:
    text = run.request.query.strip()
    if not text and not run.request.searches:
        raise InvalidSearchInput("empty query")
    collection_ids_for(
        run.request.collections, request_access(run.request)
    )  # unknown names: a clear error before any work
    if run.request.searches:  # typed searches: no text to parse
        plan = user_plan(" ".join(text.split()), [(kind.lower(), value) for kind, value in run.request.searches])
    else:
        plan = parse_query_document(text)
    if plan is None:
        return QueryPlan(original=text)
    for message in plan.warnings:
        run.warn(message)
    return plan


def _expand(run: _Run, query: str, intent: str | None) -> tuple[list[QueryVariant], str]:
    model = generate_model()
    if model is None:
        run.off.append("query expansion: PMD_GENERATE_MODEL is not set")
        return [], "none"
    absent = model_absent("expansion", model)
    if absent:
        run.off.append(f"query expansion: {absent} (asked again after PMD_MISSING_MODEL_RECHECK)")
        return [], "none"
    since = time.monotonic()
    key = expansion_cache_key(query=query, intent=intent, model=model)
    variants = cached_expansion(key)
    if variants:
        run.timed("expand", since)
        return variants, "cache"
    timeout = min(float(settings.PMD_EXPAND_TIMEOUT), run.remaining())
    backend = pipeline_backend(timeout + 1.0)  # the deadline below decides, not the socket
    outcome = run_concurrently(
        {"expand": lambda: request_expansion(backend=backend, model=model, query=query, intent=intent)},
        timeout=timeout,
    )
    run.timed("expand", since)
    error = outcome.errors.get("expand")
    if outcome.timed_out or isinstance(error, LLMBackendTimeout):
        run.warn(f"query expansion by {model} took longer than {timeout:g}s and was skipped")
        return [], "none"
    if error is not None:
        if isinstance(error, LLMModelMissing):
            remember_absent("expansion", model, str(error))
            run.warn(
                f"query expansion skipped: {error} (not asked again for "
                f"{settings.PMD_MISSING_MODEL_RECHECK:g} s: PMD_MISSING_MODEL_RECHECK)"
            )
        elif not _note_llm_error(run, error):
            run.warn(f"query expansion skipped: {error}")
        return [], "none"
    variants = outcome.results["expand"]
    if not variants:
        run.warn(f"query expansion by {model} gave no usable variants: searching the query as written")
        return [], "none"
    store_expansion(key, variants)
    return variants, "model"


def _note_llm_error(run: _Run, error: BaseException) -> bool:
    """Remember (and say once) that the LLM server is unreachable: later stages skip it."""
    if isinstance(error, LLMBackendUnavailable):
        if not run.llm_down:
            run.llm_down = str(error)
            run.warn(f"{error}: keyword results only (no expansion, vector search or re-ranking)")
        return True
    return False


def _retrieve(
    run: _Run, plan: QueryPlan, depth: int, lists: list[RankedList], hits: dict[str, dict[str, SearchResult]], lead=None
) -> SearchResponse | None:
    """Run the plan's retrievals concurrently. With `lead` (a function of its response),
    the keyword search of the query itself runs with them, is handled first (its errors
    raised, as when it runs alone), and is returned."""
    request = run.request
    user_written = plan.source == "user" and not plan.original
    variant_weight = ORIGINAL_WEIGHT if user_written else VARIANT_WEIGHT
    jobs: dict[str, tuple[str, str, float]] = {}  # list name → (retriever, text, weight)
    if plan.original:
        jobs["original/vector"] = (VECTOR, plan.original, ORIGINAL_WEIGHT)
    numbers = {LEX: 0, VEC: 0, HYDE: 0}
    for variant in plan.variants:
        numbers[variant.kind] += 1
        label = variant.kind if variant.kind == HYDE else f"{variant.kind} {numbers[variant.kind]}"
        retriever = KEYWORD if variant.kind == LEX else VECTOR
        jobs[f"{label}/{retriever}"] = (retriever, variant.text, variant_weight)

    if run.llm_down:
        jobs = {name: job for name, job in jobs.items() if job[0] == KEYWORD}
    if not jobs and lead is None:
        return None

    def call(retriever: str, text: str):
        sub = _sub_request(request, text, Mode.KEYWORD if retriever == KEYWORD else Mode.VECTOR, depth)
        return _keyword(sub) if retriever == KEYWORD else _vector(sub)

    def call_lead():  # in this thread, while the others run
        since = time.monotonic()
        response = call(KEYWORD, plan.original)
        run.timed("keyword", since)
        return response

    calls = {name: (lambda r=r, t=t: call(r, t)) for name, (r, t, _) in jobs.items()}
    # Keep a little time for fusion and re-ranking after retrieval.
    timeout = max(0.5, run.remaining() * 0.8) if run.remaining() > 0 else 0.0
    outcome = run_concurrently(
        calls, timeout=timeout, workers=4, uses_db=True, alongside=call_lead if lead is not None else None
    )
    vector_failed: list[str] = []
    first = outcome.alongside
    if first is not None:
        _add_list(lists, hits, LEAD, first, ORIGINAL_WEIGHT)
        for message in first.warnings:
            run.warn(message)
        lead(first)
    for name in jobs:  # in plan order, so fusion is deterministic
        retriever, _, weight = jobs[name]
        if name in outcome.results:
            response = outcome.results[name]
            for message in response.warnings:
                run.warn(message)
            _add_list(lists, hits, name, response, weight)
        elif name in outcome.errors:
            error = outcome.errors[name]
            if retriever == VECTOR:
                if not _note_llm_error(run, error):
                    vector_failed.append(str(error) or type(error).__name__)
            elif isinstance(error, InvalidSearchInput):  # a variant the keyword parser rejects
                run.warn(f"{name} skipped: {error}")
            else:
                run.warn(f"{name} search failed: {type(error).__name__}: {error}")
        else:
            run.warn(f"{name} search did not finish within {timeout:.1f}s and was left out")
    if vector_failed:
        any_vector = any(ranked.name.endswith("/vector") for ranked in lists)
        run.warn(f"vector search failed: {vector_failed[0]}" + ("" if any_vector else ": keyword results only"))
    return first


def _rerank(run: _Run, plan: QueryPlan, candidates, hits) -> tuple[dict[str, float], dict]:
    model = rerank_model()
    info: dict = {"model": model, "method": None}
    if model is None:
        run.off.append("re-ranking: PMD_RERANK_MODEL is not set (results in fusion order)")
        return {}, info
    if run.llm_down and not settings.PMD_RERANK_URL:  # a re-ranker of its own may still answer
        return {}, info
    absent = model_absent("rerank", model)
    if absent:  # nothing prepared for a stage that will not run
        run.off.append(f"re-ranking: {absent} (asked again after PMD_MISSING_MODEL_RECHECK)")
        return {}, info
    since = time.monotonic()
    items = _rerank_items(candidates, hits, plan.rerank_query)
    run.timed("rerank_prepare", since)
    timeout = min(float(settings.PMD_RERANK_TIMEOUT), run.remaining())
    if timeout <= 0.05:
        run.warn("re-ranking skipped: the query deadline (PMD_QUERY_TIMEOUT) was reached")
        return {}, info
    since = time.monotonic()
    outcome = rerank(
        backend=rerank_backend(timeout=float(math.ceil(timeout + 1.0)), retries=min(1, int(settings.PMD_LLM_RETRIES))),
        model=model,
        query=plan.rerank_query,
        items=items,
        intent=plan.intent,
        timeout=timeout,
        concurrency=int(settings.PMD_RERANK_CONCURRENCY),
        api=settings.PMD_RERANK_API,
        batch=int(settings.PMD_RERANK_BATCH),
    )
    run.timed("rerank", since)
    info.update(
        method=outcome.method or None,
        cached=outcome.cached,
        judged=outcome.judged,
        unjudged=outcome.unjudged,
        failed=outcome.failed,
    )
    if outcome.error:
        if outcome.model_missing:
            remember_absent("rerank", model, outcome.error)
            run.warn(
                f"re-ranking skipped: {outcome.error}: results in fusion order (not asked again for "
                f"{settings.PMD_MISSING_MODEL_RECHECK:g} s: PMD_MISSING_MODEL_RECHECK)"
            )
        elif not run.llm_down:
            run.warn(f"re-ranking skipped: {outcome.error}: results in fusion order")
        return {}, info
    for message in outcome.warnings:
        run.warn(message)
    return outcome.scores, info


# --- helpers ---------------------------------------------------------------------------------


def _sub_request(request: SearchRequest, text: str, mode: str, depth: int) -> SearchRequest:
    return SearchRequest(
        query=text,
        mode=mode,
        limit=depth,
        collections=list(request.collections),
        hits_per_document=1,
        access=request_access(request),
        filters=request.filters,
    )


def _keyword(request: SearchRequest) -> SearchResponse:
    return keyword_search(request, snippets=False)  # the shown hits' snippets: complete_snippets


def _vector(request: SearchRequest) -> SearchResponse:
    # the shown hits' snippets: complete_snippets; the chance cosine: fusion's NQC
    return vector_search(request, snippets=False, chance=True)


def _add_list(lists, hits, name: str, response: SearchResponse, weight: float) -> None:
    by_key: dict[str, SearchResult] = {}
    keys, scores = [], []
    for result in response.results:
        key = result.uri
        keys.append(key)
        scores.append(round(result.scores.get("share", result.score), 6))  # keyword: the hit's own share
        by_key.setdefault(key, result)
    kind = VECTOR if name.endswith("/" + VECTOR) else KEYWORD
    # fusion standardises the retriever's own score: best-passage BM25 (its per-query
    # ideal is a constant factor, which z-scores and NQC ignore) or the best chunk's cosine
    values = [float(r.scores.get("bm25" if kind == KEYWORD else "cosine", r.score)) for r in response.results]
    chance = response.chance_score if kind == VECTOR else None  # cosines: commitment above chance
    lists.append(
        RankedList(name=name, keys=keys, scores=scores, weight=weight, kind=kind, values=values, chance=chance)
    )
    hits[name] = by_key


def _representative(key: str, candidate, hits) -> SearchResult:
    """The hit shown for a document: from the list where it ranked best (query lists first)."""
    best = None
    for name, hit in candidate.hits.items():
        order = (hit.rank, 0 if name.startswith("original/") else 1)
        if best is None or order < best[0]:
            best = (order, name)
    return hits[best[1]][key]


def _rerank_items(candidates, hits, query: str) -> list[RerankItem]:
    """Each candidate's best chunk: the chunk around the line its best hit points at."""
    params = chunk_params_from_settings()
    shown = {c.key: _representative(c.key, c, hits) for c in candidates}
    complete_snippets(shown.values())  # in place: the results shown later are copies of these
    pairs = {(r.collection, r.path) for r in shown.values()}
    bodies: dict[tuple[str, str], str] = {}
    if pairs:
        condition = Q()
        for collection, path in pairs:
            condition |= Q(collection__name=collection, path=path)
        for collection, path, body in Document.objects.filter(condition, active=True).values_list(
            "collection__name", "path", "content__body"
        ):
            bodies[(collection, path)] = body
    items = []
    for candidate in candidates:
        result = shown[candidate.key]
        body = bodies.get((result.collection, result.path))
        if body is None:
            text = f"{result.title}\n{result.snippet}".strip()
        else:
            text = _chunk_at(chunk_markdown(searchable_text(body), params), result.line) or body
            if result.title and result.title not in text[:200]:
                text = f"{result.title}\n{text}"
        items.append(RerankItem(key=candidate.key, text=text))
    return items


def _chunk_at(chunks, line: int) -> str:
    best = None
    for chunk in chunks:
        if chunk.start_line <= max(1, line):
            best = chunk
        else:
            break
    return best.text if best else ""


def _results(
    run: _Run, fusion: Fusion, blended: list[Blended], tail, hits, explain_plan: dict, rerank_info: dict
) -> list[SearchResult]:
    results = []
    for position, item in enumerate(blended, start=1):
        result = _result_for(item.candidate, hits, item.final)
        result.scores = {
            "final": round(item.final, 6),
            "fused": round(item.candidate.fused, 6),
            "retrieval": round(item.retrieval, 6),
            "rerank": None if item.rerank is None else round(item.rerank, 6),
            "blend_weight": item.weight,
            **{name: hit.score for name, hit in item.candidate.hits.items()},
        }
        if run.request.explain:
            result.explain = _explain(
                fusion,
                item.candidate,
                item.fusion_rank,
                position,
                item.retrieval,
                item.rerank,
                item.weight,
                item.final,
                explain_plan,
                rerank_info,
            )
        results.append(result)
    # Fused documents beyond the candidate limit follow, in fusion order, scored below
    # the last candidate so that no unjudged document overtakes a judged one.
    if tail and results:
        floor = min(r.score for r in results)
        top_tail = fusion.retrieval(tail[0])
        for offset, candidate in enumerate(tail, start=1):
            retrieval = fusion.retrieval(candidate)
            score = min(retrieval, floor * 0.99 * (retrieval / top_tail if top_tail > 0 else 1.0))
            result = _result_for(candidate, hits, score)
            result.scores = {
                "final": round(score, 6),
                "fused": round(candidate.fused, 6),
                "retrieval": round(retrieval, 6),
                **{name: hit.score for name, hit in candidate.hits.items()},
            }
            if run.request.explain:
                rank = len(blended) + offset
                result.explain = _explain(
                    fusion,
                    candidate,
                    rank,
                    rank,
                    retrieval,
                    None,
                    None,
                    score,
                    explain_plan,
                    rerank_info,
                    beyond_limit=True,
                )
            results.append(result)
    return results


def _result_for(candidate, hits, score: float) -> SearchResult:
    result = copy.copy(_representative(candidate.key, candidate, hits))
    result.highlights = list(result.highlights)
    result.context = list(result.context)
    result.score = max(0.0, min(1.0, score))
    return result


def _explain(
    fusion: Fusion,
    candidate,
    fusion_rank,
    position,
    retrieval,
    rerank_score,
    weight,
    final,
    explain_plan,
    rerank_info,
    *,
    beyond_limit: bool = False,
) -> dict:
    return {
        "rank": position,
        "fusion_rank": fusion_rank,
        "lists": {name: hit.as_dict() for name, hit in candidate.hits.items()},
        "fusion": fusion.explain(),
        "z": {kind: round(z, 4) for kind, z in candidate.kind_z.items()},
        "evidence": {kind: round(v, 4) for kind, v in candidate.evidence.items()},
        "fused": round(candidate.fused, 6),
        "pinned": candidate.pinned,
        "retrieval": None if retrieval is None else round(retrieval, 6),
        "rerank": None if rerank_score is None else round(rerank_score, 6),
        "blend_weight": weight,
        "final": round(final, 6),
        "beyond_candidate_limit": beyond_limit,
        "plan": explain_plan,
        "reranker": rerank_info,
    }


def _attach_bodies(results: list[SearchResult]) -> None:
    for result in results:
        if result.body is None:
            body = (
                Document.objects.filter(collection__name=result.collection, path=result.path)
                .values_list("content__body", flat=True)
                .first()
            )
            result.body = body
