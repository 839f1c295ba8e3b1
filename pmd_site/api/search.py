"""/api/search, /api/vsearch, /api/query: the CLI's three searches (`pmd search|vsearch|query --json`);
/api/fields: the frontmatter keys they can filter by (`pmd fields --json`)."""

from typing import Literal

from ninja import Field, Query, Router
from pydantic import AliasChoices

from indexing.selectors import search_log_report
from indexing.services.saved_searches import saved_search_add, saved_search_digest_set, saved_search_remove
from indexing.services.search_log import search_feedback_record, search_log_opened
from pmd_site.api.schemas import BodyIn, ErrorOut
from search import (
    DEFAULT_LIMIT_MACHINE,
    MODE_ALIASES,
    FieldsOut,
    FiltersIn,
    Mode,
    SearchFilters,
    SearchOut,
    SearchRequest,
    filters_from_options,
    frontmatter_fields,
    mode_normalize,
    saved_search_dict,
    saved_search_run,
    saved_searches_listed,
    search_run,
)

router = Router(tags=["search"])

SearchMode = Literal[tuple(MODE_ALIASES)]  # every name of a mode; the answer says the CLI verb


class _SearchBase(BodyIn):
    query: str | None = Field(
        None,
        min_length=1,
        max_length=2000,
        description="words, and filters such as tag:db (may be only filters); may be left out when `filters` are given",
    )
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
    link_boost: float | None = Field(
        None,
        ge=0.0,
        le=5.0,
        description="query: raise notes linked to or from better hits (0 off; default PMD_LINK_BOOST)",
    )
    recency_boost: float | None = Field(
        None,
        ge=0.0,
        le=5.0,
        description="query: raise notes dated this week / month (0 off; default PMD_RECENCY_BOOST)",
    )
    sort: Literal["relevance", "date"] = Field("relevance", description="relevance, or date (newest first)")
    time_words: bool = Field(True, description='false: "last week", "yesterday", "recent" are words, not a date filter')
    correct: bool = Field(
        True, description='false: search the words as written, no typo correction ("search instead for …")'
    )


class SearchIn(_SearchBase):
    """The CLI's search options (`pmd search|vsearch|query --json`); `q` as in the query string."""

    query: str | None = Field(
        None,
        min_length=1,
        max_length=2000,
        validation_alias=AliasChoices("query", "q"),
        description="words, and filters such as tag:db (may be only filters); may be left out when `filters` are given",
    )

    filters: FiltersIn | None = None


class SearchQuery(_SearchBase):
    query: str | None = Field(None, min_length=1, max_length=2000, alias="q")
    collections: list[str] = Field(default_factory=list, alias="collection")
    tag: list[str] = Field(default_factory=list, description="notes with any of these tags (repeatable)")
    exclude_tag: list[str] = Field(default_factory=list)
    path: list[str] = Field(default_factory=list, description="path globs inside the collection (repeatable)")
    after: str | None = Field(None, max_length=100)
    before: str | None = Field(None, max_length=100)
    where: list[str] = Field(default_factory=list, description="frontmatter KEY=VALUE (KEY!=VALUE excludes)")


def search_request_from(data: _SearchBase, *, access, mode: str | None = None) -> SearchRequest:
    """Build the shared SearchRequest; a machine caller gets the --json default limit."""
    fields = {**data.dict(by_alias=False), "access": access, "face": "api"}
    if isinstance(data, SearchQuery):
        fields["filters"] = filters_from_options(
            tags=data.tag,
            exclude_tags=data.exclude_tag,
            paths=data.path,
            after=fields.pop("after"),
            before=fields.pop("before"),
            where=data.where,
        )
        for name in ("tag", "exclude_tag", "path", "where"):
            fields.pop(name, None)
    else:
        given = data.filters.dict(exclude_none=True) if data.filters is not None else None
        fields["filters"] = SearchFilters.from_dict(given)
    fields["mode"] = mode_normalize(mode or fields["mode"])
    fields["query"] = (fields["query"] or "").strip()
    if fields["limit"] is None and not fields["all"]:
        fields["limit"] = DEFAULT_LIMIT_MACHINE
    return SearchRequest(**fields)


def _search(request, data: SearchIn, mode: str | None = None) -> dict:
    request = search_request_from(data, access=request.auth, mode=mode)
    response = search_run(request)
    return {**response.as_dict(), "search_id": response.search_id}


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


@router.post(
    "/query", response=_SEARCH_RESPONSES, summary="Hybrid search: expansion, BM25 + vectors, fusion, re-ranking"
)
def query_post(request, body: SearchIn):
    return _search(request, body, mode=Mode.HYBRID)


@router.get(
    "/fields",
    response={200: FieldsOut, 401: ErrorOut, 404: ErrorOut},
    summary="The frontmatter keys to filter by, with their types and most frequent values",
)
def fields_get(request, collection: list[str] = Query(default_factory=list)):
    return {"fields": frontmatter_fields(access=request.auth, collections=collection or None)}


class OpenedIn(BodyIn):
    uri: str = Field(min_length=1, max_length=4200, description="the result opened (pmd://collection/path)")


@router.post(
    "/searches/{search_id}/opened",
    response={200: dict, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Note the result opened from a search (its search_id); only by whoever searched",
)
def search_opened(request, search_id: int, body: OpenedIn):
    return {"recorded": search_log_opened(access=request.auth, entry_id=search_id, uri=body.uri)}


class FeedbackIn(BodyIn):
    uri: str = Field(min_length=1, max_length=4200, description="the result rated (pmd://collection/path)")
    helpful: bool = Field(description="true: thumbs up; false: thumbs down")


@router.post(
    "/searches/{search_id}/feedback",
    response={200: dict, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Rate a result of a search (its search_id): helpful or not; only by whoever searched",
)
def search_feedback(request, search_id: int, body: FeedbackIn):
    return {
        "recorded": search_feedback_record(access=request.auth, entry_id=search_id, uri=body.uri, helpful=body.helpful)
    }


@router.get(
    "/searches",
    response={200: dict, 401: ErrorOut},
    summary="The search log: top, zero-result, weak and slow queries (staff: everyone's; a member: their own)",
)
def searches_get(request, days: int = Query(30, ge=1, le=3650), limit: int = Query(10, ge=1, le=100)):
    return search_log_report(access=request.auth, days=days, limit=limit)


class SavedIn(BodyIn):
    name: str = Field(min_length=1, max_length=100)
    query: str = Field("", max_length=2000, description="words and filters, as in /api/search")
    mode: SearchMode = "search"
    filters: FiltersIn | None = None
    collections: list[str] = Field(default_factory=list)
    group: str | None = Field(None, description="share it with this group of yours (its members may run it)")
    webhook_url: str = Field("", max_length=2000, description="POST a JSON digest of its new matches here")
    email_digest: bool = Field(False, description="email its new matches to you (when email is configured)")


@router.get(
    "/saved", response={200: dict, 401: ErrorOut}, summary="Your saved searches and those shared with your groups"
)
def saved_list(request):
    return {"saved": saved_searches_listed(access=request.auth)}


@router.post(
    "/saved",
    response={201: dict, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 422: ErrorOut},
    summary="Save a search (private, or shared with a group)",
)
def saved_add(request, body: SavedIn):
    saved = saved_search_add(
        access=request.auth,
        name=body.name,
        query=body.query,
        mode=mode_normalize(body.mode),
        filters=body.filters.model_dump(exclude_none=True) if body.filters else None,
        collections=body.collections,
        group=body.group,
        webhook_url=body.webhook_url,
        email_digest=body.email_digest,
    )
    return 201, saved_search_dict(saved, access=request.auth)


# Names are routed with `path` (and /run first), so one saved before names were checked, with a
# '/' in it, can still be run, changed and removed.
@router.post(
    "/saved/{path:name}/run",
    response={200: dict, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Run a saved search: its results, and `new`: those new since its last run",
)
def saved_run(request, name: str, limit: int | None = Query(None, ge=1, le=1000)):
    response, new = saved_search_run(access=request.auth, name=name, face="api", limit=limit or DEFAULT_LIMIT_MACHINE)
    return {**response.as_dict(), "new": new}


class SavedDigestIn(BodyIn):
    webhook_url: str | None = Field(None, max_length=2000, description='POST its new matches here; "" stops')
    email_digest: bool | None = Field(None, description="email its new matches to you (when email is configured)")


@router.patch(
    "/saved/{path:name}",
    response={200: dict, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 422: ErrorOut},
    summary="Change where a saved search of yours sends its digest (webhook, email)",
)
def saved_digest_set(request, name: str, body: SavedDigestIn):
    saved = saved_search_digest_set(
        access=request.auth, name=name, webhook_url=body.webhook_url, email_digest=body.email_digest
    )
    return saved_search_dict(saved, access=request.auth)


@router.delete(
    "/saved/{path:name}",
    response={204: None, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut},
    summary="Remove a saved search of yours",
)
def saved_remove(request, name: str):
    saved_search_remove(access=request.auth, name=name)
    return 204, None
