"""One entry point from a SearchRequest to the mode's service, shared by the API, MCP and web."""

from __future__ import annotations

from search.pipeline.hybrid import hybrid_search
from search.retrieval.keyword import keyword_search
from search.request import Mode, SearchRequest
from search.results import SearchResponse
from search.retrieval.vector import vector_search

SERVICES = {Mode.KEYWORD: keyword_search, Mode.VECTOR: vector_search, Mode.HYBRID: hybrid_search}
# Names people use for the modes, besides the CLI command names.
MODE_ALIASES = {"keyword": Mode.KEYWORD, "lex": Mode.KEYWORD, "bm25": Mode.KEYWORD,
                "semantic": Mode.VECTOR, "vector": Mode.VECTOR, "vec": Mode.VECTOR,
                "hybrid": Mode.HYBRID, "deep": Mode.HYBRID}


def normalize_mode(mode: str) -> str:
    mode = (mode or Mode.KEYWORD).strip().lower()
    mode = MODE_ALIASES.get(mode, mode)
    if mode not in SERVICES:
        raise ValueError(f"unknown search mode '{mode}': use one of {', '.join(Mode.ALL)}")
    return mode


def search_run(request: SearchRequest) -> SearchResponse:
    """Run the request through its mode's service (the one place adapters call)."""
    return SERVICES[normalize_mode(request.mode)](request)
