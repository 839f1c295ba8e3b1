"""/api/history: search the git history of collections that are repositories, as `pmd history` does."""

from typing import Literal

from ninja import Query, Router

from pmd_site.api.schemas import ErrorOut
from search import HistoryOut, HistoryRequest, history_search

router = Router(tags=["history"])


@router.get(
    "/history",
    response={200: HistoryOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut, 503: ErrorOut},
    summary="Commits of the collections that are git repositories: words, changed-path globs, author, dates",
)
def history(
    request,
    q: str = Query("", max_length=2000, description="words to search; empty: newest matching"),
    mode: Literal["hybrid", "keyword", "vector"] = "hybrid",
    collection: list[str] = Query(default_factory=list),
    path: list[str] = Query(default_factory=list, description="changed-file globs (any)"),
    author: str = Query("", max_length=500),
    after: str | None = None,
    before: str | None = None,
    limit: int = Query(10, ge=1, le=1000),
    diff: bool = False,
):
    return history_search(
        HistoryRequest(
            query=q,
            access=request.auth,
            mode=mode,
            collections=collection,
            paths=path,
            author=author,
            after=after,
            before=before,
            limit=limit,
            diff=diff,
        )
    ).as_dict()
