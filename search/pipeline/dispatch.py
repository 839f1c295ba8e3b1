"""One entry point from a SearchRequest to the mode's service: the CLI, API, web, MCP and bench call it.

Here, once for every face and mode, the filters written in the query text (`tag:db`,
`after:"last week"`, `status:draft`…; search.filters) are taken out of it and merged with the
request's structured `filters`; the services then search the remaining words inside those
filters (search.retrieval.filters). A query of filters only lists the matching notes, newest
first. `sort=date` orders the results newest first.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import datetime

from django.conf import settings

from indexing.convert import is_converted, location_at
from indexing.errors import EmptyQuery, InvalidSearchInput
from indexing.models import Document
from indexing.patterns import LazyPattern
from indexing.replicas import replica_reads
from indexing.services.search_log import search_log_record
from indexing.snippets import snippet_reading
from search.filters import SORT_DATE, SORTS, SearchFilters, parse_filters, time_words
from search.request import Mode, SearchRequest, mode_normalize
from search.results import SearchResponse, SearchResult
from search.retrieval.common import collection_ids_for, request_access
from search.retrieval.filters import fields_resolved, filtered_notes, frontmatter_keys
from search.retrieval.keyword import keyword_search
from search.retrieval.spelling import query_correction, typed_prefix

# A top hit holding at least this share of the query (its rarity-weighted words) is a strong answer:
# no correction. 0.7 on SciFact keeps 0.965 of clean nDCG@10 under typos and clean queries unchanged
# (0.5: 0.930; `pmd bench … --typos`).
STRONG_SCORE = 0.7


def mode_service(mode: Mode):
    """The service that searches in this mode. Vector and hybrid search are imported when first asked
    for: they bring in the embedding and LLM clients, which a keyword search does not need (start-up
    time of `pmd search`)."""
    if mode == Mode.KEYWORD:
        return keyword_search
    if mode == Mode.VECTOR:
        from search.retrieval.vector import vector_search  # noqa: PLC0415 - start-up time (see above)

        return vector_search
    from search.pipeline.hybrid import hybrid_search  # noqa: PLC0415 - start-up time (see above)

    return hybrid_search


def sort_normalize(name: str | None) -> str:
    text = (name or "relevance").strip().lower()
    if text not in SORTS:
        raise InvalidSearchInput(f"unknown sort '{text}': use relevance or date")
    return text


@replica_reads
def search_run(request: SearchRequest) -> SearchResponse:
    """Run the request through its mode's service (the one place adapters call). A request with
    neither words nor a filter is EmptyQuery here, whatever the mode and the face."""
    access = request_access(request)  # who is asking decides what is read: no request goes without it
    request = replace(request, mode=mode_normalize(request.mode), sort=sort_normalize(request.sort))
    asked = replace(request)  # as asked: searched again without its time words when they leave nothing
    started = time.perf_counter()
    original = request.query
    warnings: list[str] = []
    filters = request.filters
    if ":" in (request.query or "") or (filters is not None and not filters.empty):
        ids: list = []  # the searched collections, looked up once (a bad name is an error here)

        def visible_ids():
            if not ids:
                ids.append(collection_ids_for(request.collections, access))
            return ids[0]

        parsed = parse_filters(request.query, field_keys=lambda words: frontmatter_keys(words, visible_ids()))
        filters = parsed.filters.merged(filters)
        warnings += parsed.warnings
        if not filters.empty:
            filters, unknown = fields_resolved(filters, visible_ids())
            warnings += unknown
            request.query = parsed.text
        else:
            filters = None
    read_time = None
    if (
        settings.PMD_TIME_WORDS
        and request.time_words
        and not request.searches
        and (filters is None or not filters.dated)
    ):
        read_time = time_words(request.query)
        if read_time is not None:
            filters = read_time.filters.merged(filters)
            request.query = read_time.text
    request.filters = filters if filters is not None and not filters.empty else None
    if (
        request.typing
        and request.mode == Mode.KEYWORD
        and original
        and not original[-1].isspace()
        and request.query.strip()
        and original.rstrip().endswith(request.query.rstrip())
    ):
        request.query = typed_prefix(request.query, collection_ids=collection_ids_for(request.collections, access))
    if not request.query.strip() and request.filters is None and not request.searches:
        raise EmptyQuery()
    filter_ms = (time.perf_counter() - started) * 1000
    if request.filters is not None and not request.query.strip() and not request.searches:
        response = filtered_notes(request, request.filters)
        warnings.append(f"no words to search for: the notes matching {request.filters.describe()}, newest first")
    else:
        response = _searched(request, access)
        if response.corrected_query:
            response.corrected_query = _corrected_text(original, response.corrected_query, request.query)
    if read_time is not None and not response.results and read_time.text.strip():
        # "recent data on …" over notes none of which is dated so: the words were words
        again = search_run(replace(asked, time_words=False))
        again.warnings.insert(0, f"no notes dated '{read_time.phrase}' match: searched it as words")
        return again
    where_found(response.results)
    response.query = original
    response.time_words = read_time.phrase if read_time is not None else None
    response.filters = request.filters
    response.sort = request.sort
    if request.filters is not None:
        response.timings["filters"] = filter_ms
    response.warnings = list(dict.fromkeys(warnings + response.warnings))
    if request.sort == SORT_DATE:
        response.results = sorted_by_date(response.results)
    response.search_id = search_log_record(
        access=access,
        face=request.face,
        mode=request.mode,
        query=original,
        results=len(response.results),
        top_score=max((r.score for r in response.results), default=None),
        latency_ms=(time.perf_counter() - started) * 1000,
        corrected_query=response.corrected_query,
    )
    return response


def where_found(results: list[SearchResult]) -> None:
    """The page (slide, sheet) of each match in a converted file, from the markers of its text, and
    every snippet's reading (indexing.snippets), both from the notes' text read once."""
    wanted = [r for r in results if r.snippet or is_converted(r.path)]
    if not wanted:
        return
    bodies = dict(
        Document.objects.filter(docid__in={r.docid for r in wanted}, active=True).values_list("docid", "content__body")
    )
    for result in wanted:
        body = bodies.get(result.docid)
        if is_converted(result.path):
            found = location_at(body, result.line or 1) if body else None
            if found is not None:
                result.location, result.anchor = str(found), found.anchor
            _snippet_without_markers(result)
        if result.snippet:
            reading = snippet_reading(
                result.snippet, result.highlights, line=result.line, body=body, title=result.title
            )
            result.text, result.text_highlights = reading.text, reading.highlights
            result.headings, result.code = reading.headings, reading.code


_MARKERS_AT_START = LazyPattern(r"\A(?:\[(?:page|slide|sheet|chapter) [^\]\n]*\]\n+)+")
_MARKERS_AT_END = LazyPattern(r"(?:\n+\[(?:page|slide|sheet|chapter) [^\]\n]*\])+\s*\Z")


def _snippet_without_markers(result: SearchResult) -> None:
    """A snippet does not start or end on a page marker line: the location says the page."""
    end = _MARKERS_AT_END.search(result.snippet)
    if end is not None and all(stop <= end.start() for _, stop in result.highlights):
        result.snippet = result.snippet[: end.start()]
    start = _MARKERS_AT_START.match(result.snippet)
    if start is not None and all(begin >= start.end() for begin, _ in result.highlights):
        cut = start.end()
        result.snippet = result.snippet[cut:]
        result.line = (result.line or 1) + start.group().count("\n")
        result.highlights = [(begin - cut, stop - cut) for begin, stop in result.highlights]


def _searched(request: SearchRequest, access) -> SearchResponse:
    """The mode's service; a query holding a word no searched note has (a typo) is searched again with
    it corrected when the words as written find nothing strong (a keyword probe decides for the
    vector and hybrid modes, so their costly pipeline runs once)."""
    service = mode_service(request.mode)
    correction = None
    if settings.PMD_TYPO_CORRECTION and request.correct and request.query.strip() and not request.searches:
        correction = query_correction(request.query, collection_ids=collection_ids_for(request.collections, access))
    if correction is None:
        return service(request)
    corrected = replace(request, query=correction.text)
    if request.mode == Mode.KEYWORD:
        first = service(request)
        if _top_score(first) >= STRONG_SCORE:
            return first
        second = service(corrected)
        if _top_score(second) <= _top_score(first):
            return first
    else:
        probe = keyword_search(replace(request, limit=1, all=False, hits_per_document=1), snippets=False)
        if _top_score(probe) >= STRONG_SCORE:
            return service(request)
        second = service(corrected)
    second.corrected_query = correction.text
    return second


def _top_score(response: SearchResponse) -> float:
    return max((r.score for r in response.results), default=0.0)


def _corrected_text(original: str, corrected_words: str, searched_words: str) -> str:
    """The whole query as written (filters included) with the corrected words in place."""
    if searched_words and searched_words in original:
        return original.replace(searched_words, corrected_words, 1)
    return corrected_words


def sorted_by_date(results: list[SearchResult]) -> list[SearchResult]:
    """Newest first (a note without a date last); a document's hits stay together, in their order."""
    first: dict[str, int] = {}
    for n, r in enumerate(results):
        first.setdefault(r.uri, n)
    return sorted(results, key=lambda r: (r.date is None, -_timestamp(r.date), first[r.uri]))


def _timestamp(day: str | None) -> float:
    try:
        return datetime.fromisoformat(day).timestamp() if day else 0.0
    except ValueError:
        return 0.0


__all__ = ["SearchFilters", "search_run", "sort_normalize"]
