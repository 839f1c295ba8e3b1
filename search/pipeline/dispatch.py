"""One entry point from a SearchRequest to the mode's service: the CLI, API, web, MCP and bench call it."""

from __future__ import annotations

from search.pipeline.hybrid import hybrid_search
from search.request import Mode, SearchRequest, mode_normalize
from search.results import SearchResponse
from search.retrieval.common import request_access
from search.retrieval.keyword import keyword_search
from search.retrieval.vector import vector_search

SERVICES = {Mode.KEYWORD: keyword_search, Mode.VECTOR: vector_search, Mode.HYBRID: hybrid_search}


def search_run(request: SearchRequest) -> SearchResponse:
    """Run the request through its mode's service (the one place adapters call)."""
    request_access(request)  # who is asking decides what is read: no request goes without it
    request.mode = mode_normalize(request.mode)
    return SERVICES[request.mode](request)
