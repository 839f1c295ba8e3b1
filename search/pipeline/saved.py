"""Running a saved search (indexing.services.saved_searches): the same search_run as every face, then
what is new since the last run."""

from __future__ import annotations

from search.filters import SearchFilters
from search.pipeline.dispatch import search_run
from search.request import SearchRequest
from search.results import SearchResponse

from indexing.services.saved_searches import saved_search_get, saved_search_mark_run


def saved_search_run(*, access, name: str, face: str = "", limit: int | None = None) -> tuple[SearchResponse, list[str]]:
    """(the response, the result URIs new since the last run of this saved search)."""
    saved = saved_search_get(access=access, name=name)
    response = search_run(SearchRequest(
        query=saved.query, mode=saved.mode, limit=limit, collections=list(saved.collections or []), access=access,
        filters=SearchFilters.from_dict(saved.filters or None), face=face))
    new = saved_search_mark_run(saved, [r.uri for r in response.results])
    return response, new


def saved_search_dict(saved) -> dict:
    return {"name": saved.name, "query": saved.query, "mode": saved.mode, "filters": saved.filters,
            "collections": saved.collections, "shared_with": saved.group.name if saved.group else None,
            "owner": saved.owner.get_username() if saved.owner else "local",
            "last_run": saved.last_run.isoformat() if saved.last_run else None}
