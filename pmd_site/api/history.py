"""/api/history: search the git history of collections that are repositories, as `pmd history` does."""

from typing import Literal

from ninja import Field, Query, Router, Schema

from pmd_site.api.schemas import ErrorOut
from search.pipeline.history import history_search
from search.retrieval.history import HistoryRequest

router = Router(tags=["history"])


class ChangedFileOut(Schema):
    status: str = Field(..., description="A added, M changed, D deleted, R renamed, C copied, T type changed")
    path: str
    old_path: str = Field(..., description="the name before a rename or copy")
    docid: str | None = Field(None, description="the note at that path as it is now, if it still exists")
    uri: str | None = None
    title: str = ""


class CommitOut(Schema):
    collection: str
    sha: str
    short: str
    title: str
    message: str
    author: str
    email: str
    date: str
    score: float
    snippet: str
    files: list[ChangedFileOut]
    scores: dict
    diff: str | None = Field(None, description="the diff's first PMD_HISTORY_DIFF_LINES lines (with diff=true)")
    diff_truncated: bool | None = None


class HistoryOut(Schema):
    query: str
    mode: str
    results: list[CommitOut]
    warnings: list[str]
    timings_ms: dict[str, float]


@router.get("/history", response={200: HistoryOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut, 503: ErrorOut},
            summary="Commits of the collections that are git repositories: words, changed-path globs, author, dates")
def history(request, q: str = Query("", max_length=2000, description="words to search; empty: newest matching"),
            mode: Literal["hybrid", "keyword", "vector"] = "hybrid",
            collection: list[str] = Query(default_factory=list),
            path: list[str] = Query(default_factory=list, description="changed-file globs (any)"),
            author: str = Query("", max_length=500), after: str | None = None, before: str | None = None,
            limit: int = Query(10, ge=1, le=1000), diff: bool = False):
    return history_search(HistoryRequest(
        query=q, access=request.auth, mode=mode, collections=collection, paths=path, author=author,
        after=after, before=before, limit=limit, diff=diff)).as_dict()
