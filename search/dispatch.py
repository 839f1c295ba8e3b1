"""One entry point from a SearchRequest to the mode's service, shared by the API and MCP.

Each mode's service lives in its own module (keyword, vector, hybrid); a mode whose module
has not been installed/landed reports itself unavailable instead of answering with nothing.
"""

from __future__ import annotations

import importlib

from search.request import Mode, SearchRequest
from search.results import SearchResponse

SERVICES = {
    Mode.KEYWORD: ("search.keyword", "keyword_search"),
    Mode.VECTOR: ("search.vector", "vector_search"),
    Mode.HYBRID: ("search.hybrid", "hybrid_search"),
}
# Names people use for the modes, besides the CLI command names.
MODE_ALIASES = {"keyword": Mode.KEYWORD, "lex": Mode.KEYWORD, "bm25": Mode.KEYWORD,
                "semantic": Mode.VECTOR, "vector": Mode.VECTOR, "vec": Mode.VECTOR,
                "hybrid": Mode.HYBRID, "deep": Mode.HYBRID}


class SearchUnavailable(RuntimeError):
    """The mode cannot run here (not installed yet, or its model backend is down)."""


def normalize_mode(mode: str) -> str:
    mode = (mode or Mode.KEYWORD).strip().lower()
    mode = MODE_ALIASES.get(mode, mode)
    if mode not in SERVICES:
        raise ValueError(f"unknown search mode '{mode}': use one of {', '.join(Mode.ALL)}")
    return mode


def search_service(mode: str):
    module_name, function = SERVICES[normalize_mode(mode)]
    try:
        module = importlib.import_module(module_name)
        return getattr(module, function)
    except (ModuleNotFoundError, AttributeError) as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name != module_name:
            raise
        raise SearchUnavailable(f"search mode '{mode}' is not available in this build yet") from None


def search_run(request: SearchRequest) -> SearchResponse:
    """Run the request through its mode's service (the one place adapters call)."""
    return search_service(request.mode)(request)


def mode_available(mode: str) -> bool:
    try:
        search_service(mode)
    except SearchUnavailable:
        return False
    return True
