"""/api/search, /api/vsearch, /api/query: the CLI's three searches (`pmd search|vsearch|query --json`)."""

from typing import Any, Literal

from ninja import Field, Query, Router, Schema
from ninja.errors import HttpError

from search.api.schemas import ErrorOut
from search.pipeline.dispatch import search_run
from search.request import (
    DEFAULT_LIMIT_MACHINE,
    MODE_ALIASES,
    Mode,
    SearchRequest,
    mode_normalize,
)

router = Router(tags=["search"])

SearchMode = Literal[tuple(MODE_ALIASES)]  # every name of a mode; the answer says the CLI verb


class SearchIn(Schema):
    """The CLI's search options (`pmd search|vsearch|query --json`)."""

    query: str = Field(..., min_length=1, max_length=2000)
    mode: SearchMode = "search"
    limit: int | None = Field(None, ge=1, le=1000, description="results; default 20 as with --json")
    all: bool = False
    min_score: float = Field(0.0, ge=0.0, le=1.0)
    collections: list[str] = Field(default_factory=list, description="restrict to these collections")
    full: bool = False
    line_numbers: bool = False
    hits_per_document: int = Field(1, ge=1, le=20)
    expand: bool = True
    rerank: bool = True
    candidate_limit: int = Field(40, ge=1, le=500)
    intent: str | None = Field(None, max_length=2000)
    explain: bool = False


class SearchQuery(SearchIn):
    query: str = Field(..., min_length=1, max_length=2000, alias="q")
    collections: list[str] = Field(default_factory=list, alias="collection")


class ResultOut(Schema):
    docid: str
    uri: str
    collection: str
    path: str
    title: str
    score: float
    line: int
    snippet: str
    highlights: list[list[int]] = []
    context: list[str] = []
    body: str | None = None
    scores: dict[str, Any] = {}
    explain: dict[str, Any] | None = None


class SearchOut(Schema):
    query: str
    mode: str
    results: list[ResultOut]
    warnings: list[str] = []
    timings_ms: dict[str, float] = {}


def search_request_from(data: SearchIn, *, access, mode: str | None = None) -> SearchRequest:
    """Build the shared SearchRequest; a machine caller gets the --json default limit."""
    fields = {**data.dict(by_alias=False), "access": access}
    fields["mode"] = mode_normalize(mode or fields["mode"])
    fields["query"] = fields["query"].strip()
    if fields["limit"] is None and not fields["all"]:
        fields["limit"] = DEFAULT_LIMIT_MACHINE
    return SearchRequest(**fields)


def _search(request, data: SearchIn, mode: str | None = None) -> dict:
    request = search_request_from(data, access=request.auth, mode=mode)
    if not request.query:
        raise HttpError(422, "query is empty")
    return search_run(request).as_dict()


_SEARCH_RESPONSES = {200: SearchOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut, 503: ErrorOut}


@router.get("/search", response=_SEARCH_RESPONSES, summary="Search (mode=search|vsearch|query)")
def search_get(request, params: Query[SearchQuery]):
    return _search(request, params)


@router.post("/search", response=_SEARCH_RESPONSES, summary="Search with a JSON body")
def search_post(request, body: SearchIn):
    return _search(request, body)


@router.post("/vsearch", response=_SEARCH_RESPONSES, summary="Semantic (vector) search")
def vsearch_post(request, body: SearchIn):
    return _search(request, body, mode=Mode.VECTOR)


@router.post("/query", response=_SEARCH_RESPONSES,
             summary="Hybrid search: expansion, BM25 + vectors, fusion, re-ranking")
def query_post(request, body: SearchIn):
    return _search(request, body, mode=Mode.HYBRID)
