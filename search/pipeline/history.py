"""History search, the one service every face calls: keyword, vector, or both fused.

Hybrid (the default) runs the keyword and vector retrievers of search/retrieval/history.py and
fuses them with the query-adaptive z-score fusion of `pmd query` (search/pipeline/fusion.py),
without expansion or re-ranking. Without embedded commit text, or with the LLM backend away, it
answers with the keyword list and says why in a warning.
"""

from __future__ import annotations

import time

from indexing.errors import InvalidSearchInput, LLMBackendError, NotEmbedded
from search.pipeline.fusion import KEYWORD, ORIGINAL_WEIGHT, VECTOR, RankedList, fuse
from search.retrieval.history import (
    HISTORY_MODES,
    NO_HISTORY,
    HistoryRequest,
    HistoryResponse,
    commit_hits,
    history_embedded_fingerprint,
    history_held,
    history_keyword,
    history_scope,
    history_vector,
    query_words,
)

FUSION_DEPTH = 100


def history_search(request: HistoryRequest) -> HistoryResponse:
    """Commits matching `request`, best first (newest first for filters without words)."""
    mode = (request.mode or "hybrid").strip().lower()
    if mode not in HISTORY_MODES:
        raise InvalidSearchInput(f"unknown history search mode '{mode}': use one of {', '.join(HISTORY_MODES)}")
    response = HistoryResponse(query=request.query, mode=mode)
    started = time.perf_counter()
    scope = history_scope(request)
    if not scope.nothing and not history_held(request):
        response.warnings.append(NO_HISTORY)  # not "not embedded yet": there is nothing to embed
        return response
    limit = max(1, min(1000, int(request.limit or 10)))
    words = query_words(request.query)
    if mode == "vector" and not request.query.strip():
        raise InvalidSearchInput("empty query")
    if mode == "keyword" or not words:
        rows = history_keyword(request, scope, k=limit)
        response.timings["keyword"] = (time.perf_counter() - started) * 1000
        scored = [(pk, score, {"keyword": round(score, 6)}) for pk, score in rows]
    elif mode == "vector":
        if history_embedded_fingerprint() is None:
            raise NotEmbedded("no commit is embedded yet")
        rows = history_vector(request, scope, k=limit, timings=response.timings)
        scored = [(pk, score, {"cosine": round(score, 6)}) for pk, score in rows]
    else:
        scored = _hybrid(request, scope, limit, response)
    started = time.perf_counter()
    response.results = commit_hits(scored, request)
    response.timings["results"] = (time.perf_counter() - started) * 1000
    return response


def _hybrid(request: HistoryRequest, scope, limit: int, response: HistoryResponse) -> list[tuple[int, float, dict]]:
    depth = max(FUSION_DEPTH, limit)
    started = time.perf_counter()
    keyword = history_keyword(request, scope, k=depth)
    response.timings["keyword"] = (time.perf_counter() - started) * 1000
    vector: list[tuple[int, float]] = []
    if history_embedded_fingerprint() is None:
        response.warnings.append("commit text is not embedded yet (`pmd embed`): keyword results only")
    else:
        try:
            vector = history_vector(request, scope, k=depth, timings=response.timings)
        except LLMBackendError as exc:
            response.warnings.append(f"vector search unavailable ({exc}): keyword results only")
    if not vector:
        return [(pk, score, {"keyword": round(score, 6)}) for pk, score in keyword[:limit]]
    lists = [
        RankedList(
            f"original/{KEYWORD}", [str(pk) for pk, _ in keyword], [s for _, s in keyword], weight=ORIGINAL_WEIGHT
        ),
        RankedList(f"original/{VECTOR}", [str(pk) for pk, _ in vector], [s for _, s in vector], weight=ORIGINAL_WEIGHT),
    ]
    started = time.perf_counter()
    fusion = fuse(lists, limit=limit, depth=FUSION_DEPTH)
    response.timings["fusion"] = (time.perf_counter() - started) * 1000
    by_list = {KEYWORD: dict(keyword), VECTOR: dict(vector)}
    return [
        (
            int(c.key),
            fusion.retrieval(c),
            {
                "keyword": round(by_list[KEYWORD].get(int(c.key), 0.0), 6),
                "cosine": round(by_list[VECTOR].get(int(c.key), 0.0), 6),
                "w_keyword": round(fusion.weights.get(KEYWORD, 0.0), 4),
            },
        )
        for c in fusion.candidates[:limit]
    ]
