"""One entry point from a SearchRequest to the mode's service: the CLI, API, web, MCP and bench call it.

Here, once for every face and mode, the filters written in the query text (`tag:db`,
`after:"last week"`, `status:draft`…; search.filters) are taken out of it and merged with the
request's structured `filters`; the services then search the remaining words inside those
filters (search.retrieval.filters). A query of filters only lists the matching notes, newest
first. `sort=date` orders the results newest first.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from datetime import datetime

from indexing.convert import is_converted, location_at
from indexing.errors import EmptyQuery, InvalidSearchInput
from indexing.models import Document
from search.filters import SORT_DATE, SORTS, SearchFilters, parse_filters
from search.request import Mode, SearchRequest, mode_normalize
from search.results import SearchResponse, SearchResult
from search.retrieval.common import collection_ids_for, request_access
from search.retrieval.filters import fields_resolved, filtered_notes, frontmatter_keys
from search.retrieval.keyword import keyword_search


def mode_service(mode: Mode):
    """The service that searches in this mode. Vector and hybrid search are imported when first asked
    for: they bring in the embedding and LLM clients, which a keyword search does not need (start-up
    time of `pmd search`)."""
    if mode == Mode.KEYWORD:
        return keyword_search
    if mode == Mode.VECTOR:
        from search.retrieval.vector import vector_search

        return vector_search
    from search.pipeline.hybrid import hybrid_search

    return hybrid_search


def sort_normalize(name: str | None) -> str:
    text = (name or "relevance").strip().lower()
    if text not in SORTS:
        raise InvalidSearchInput(f"unknown sort '{text}': use relevance or date")
    return text


def search_run(request: SearchRequest) -> SearchResponse:
    """Run the request through its mode's service (the one place adapters call). A request with
    neither words nor a filter is EmptyQuery here, whatever the mode and the face."""
    access = request_access(request)  # who is asking decides what is read: no request goes without it
    request = replace(request, mode=mode_normalize(request.mode), sort=sort_normalize(request.sort))
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
    request.filters = filters if filters is not None and not filters.empty else None
    if not request.query.strip() and request.filters is None and not request.searches:
        raise EmptyQuery()
    filter_ms = (time.perf_counter() - started) * 1000
    if request.filters is not None and not request.query.strip() and not request.searches:
        response = filtered_notes(request, request.filters)
        warnings.append(f"no words to search for: the notes matching {request.filters.describe()}, newest first")
    else:
        response = mode_service(request.mode)(request)
    where_found(response.results)
    response.query = original
    response.filters = request.filters
    response.sort = request.sort
    if request.filters is not None:
        response.timings["filters"] = filter_ms
    response.warnings = list(dict.fromkeys(warnings + response.warnings))
    if request.sort == SORT_DATE:
        response.results = sorted_by_date(response.results)
    return response


def where_found(results: list[SearchResult]) -> None:
    """The page (slide, sheet) of each match in a converted file, from the markers of its text."""
    wanted = [r for r in results if is_converted(r.path)]
    if not wanted:
        return
    bodies = dict(Document.objects.filter(docid__in={r.docid for r in wanted}, active=True)
                  .values_list("docid", "content__body"))
    for result in wanted:
        body = bodies.get(result.docid)
        found = location_at(body, result.line or 1) if body else None
        if found is not None:
            result.location, result.anchor = str(found), found.anchor
        _snippet_without_markers(result)


_MARKERS_AT_START = re.compile(r"\A(?:\[(?:page|slide|sheet|chapter) [^\]\n]*\]\n+)+")
_MARKERS_AT_END = re.compile(r"(?:\n+\[(?:page|slide|sheet|chapter) [^\]\n]*\])+\s*\Z")


def _snippet_without_markers(result: SearchResult) -> None:
    """A snippet does not start or end on a page marker line: the location says the page."""
    end = _MARKERS_AT_END.search(result.snippet)
    if end is not None and all(stop <= end.start() for _, stop in result.highlights):
        result.snippet = result.snippet[:end.start()]
    start = _MARKERS_AT_START.match(result.snippet)
    if start is not None and all(begin >= start.end() for begin, _ in result.highlights):
        cut = start.end()
        result.snippet = result.snippet[cut:]
        result.line = (result.line or 1) + start.group().count("\n")
        result.highlights = [(begin - cut, stop - cut) for begin, stop in result.highlights]


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
