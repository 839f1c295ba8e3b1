"""The JSON API under /api/ (django-ninja): a thin adapter over the search and indexing services.

Every endpoint parses input into the same objects the CLI builds (SearchRequest, references,
collection names), calls one service or selector, and serialises its result. Authentication is
a per-user bearer token (`pmd token create`) or the Django session of the web UI (with CSRF for
unsafe methods). Errors are `{"message": ..., "suggestions": [...], "code": ...}`; a service's
error (indexing.errors.PmdError) brings its own status and code.
"""


from typing import Any, Literal

from django.http import HttpRequest
from ninja import Field, NinjaAPI, Query, Router, Schema, Status
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.pagination import LimitOffsetPagination, paginate
from ninja.security import HttpBearer
from ninja.security.apikey import APIKeyCookie

from indexing.errors import JobNotFound, PmdError
from indexing.services.background import embedding_request, index_request
from indexing.services.refresh import collection_add as add_collection
from search.request import MODE_ALIASES, Mode, SearchRequest, mode_normalize

# --- authentication ------------------------------------------------------------------------


class TokenAuth(HttpBearer):
    """`Authorization: Bearer pmd_…` → the token's user."""

    def authenticate(self, request: HttpRequest, token: str):
        from pmd_site.security import client_address
        from search.api_tokens import token_authenticate

        user = token_authenticate(token, client_address=client_address(request) or "")
        if user is None:
            raise AuthenticationError(401, "invalid or revoked API token")
        request.user = user
        return user


class SessionAuth(APIKeyCookie):
    """The web UI's session; CSRF is checked for unsafe methods, only once a session user exists."""

    param_name = "sessionid"

    def __init__(self):
        from django.conf import settings

        self.param_name = settings.SESSION_COOKIE_NAME
        super().__init__(csrf=True)

    def __call__(self, request: HttpRequest):
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None  # anonymous: 401, not a CSRF complaint
        return super().__call__(request)

    def authenticate(self, request: HttpRequest, key: str | None):
        return request.user


api = NinjaAPI(
    title="pmd API",
    version="1",
    description=(
        "Search and read a pmd markdown index. Authenticate with `Authorization: Bearer <token>` "
        "(create one with `pmd token create --user NAME`) or a logged-in web session."
    ),
    auth=[TokenAuth(), SessionAuth()],
    urls_namespace="pmd-api",
    docs_url="/docs",
)


class ErrorOut(Schema):
    message: str
    suggestions: list[str] = []
    code: str | None = None


def _error(request, status: int, message: str, suggestions: list[str] | None = None, **extra):
    response = api.create_response(request, {"message": message, "suggestions": suggestions or [], **extra},
                                   status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="pmd"'
    return response


@api.exception_handler(AuthenticationError)
def _on_auth(request, exc: AuthenticationError):
    message = exc.message if exc.message != "Unauthorized" else (
        "authentication required: send `Authorization: Bearer <token>` (pmd token create --user NAME)")
    return _error(request, 401, message)


def _on_token_throttled(request, exc):
    """A blocked address: 429 with Retry-After, whatever token it sends (search.throttling)."""
    response = _error(request, 429, str(exc))
    response["Retry-After"] = str(exc.retry_after)
    return response


def _register_throttle_error() -> None:
    from search.throttling import TokenThrottled

    api.add_exception_handler(TokenThrottled, _on_token_throttled)


_register_throttle_error()


@api.exception_handler(HttpError)
def _on_http_error(request, exc: HttpError):
    return _error(request, exc.status_code, str(exc))


@api.exception_handler(ValidationError)
def _on_validation(request, exc: ValidationError):
    problems = []
    for err in exc.errors:
        where = ".".join(str(p) for p in err.get("loc", ()) if p not in {"body", "query", "path", "payload"})
        problems.append(f"{where or 'request'}: {err.get('msg', 'invalid')}")
    return _error(request, 422, "invalid request: " + "; ".join(problems), errors=exc.errors)


@api.exception_handler(PmdError)
def _on_pmd_error(request, exc: PmdError):
    """Every service error, by the status and code it carries (see indexing.errors)."""
    return _error(request, exc.http_status, exc.detail, exc.suggestions, code=exc.code)


def _require_staff(request) -> None:
    if not getattr(request.auth, "is_staff", False):
        raise HttpError(403, "managing collections and contexts needs a staff account")


# --- search --------------------------------------------------------------------------------

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


def search_request_from(data: SearchIn, *, mode: str | None = None) -> SearchRequest:
    """Build the shared SearchRequest; a machine caller gets the --json default limit."""
    from search.request import DEFAULT_LIMIT_MACHINE

    fields = data.dict(by_alias=False)
    fields["mode"] = mode_normalize(mode or fields["mode"])
    fields["query"] = fields["query"].strip()
    if fields["limit"] is None and not fields["all"]:
        fields["limit"] = DEFAULT_LIMIT_MACHINE
    return SearchRequest(**fields)


def _search(data: SearchIn, mode: str | None = None) -> dict:
    from search.pipeline.dispatch import search_run

    request = search_request_from(data, mode=mode)
    if not request.query:
        raise HttpError(422, "query is empty")
    return search_run(request).as_dict()


_SEARCH_RESPONSES = {200: SearchOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut, 503: ErrorOut}


@api.get("/search", response=_SEARCH_RESPONSES, tags=["search"], summary="Search (mode=search|vsearch|query)")
def search_get(request, params: Query[SearchQuery]):
    return _search(params)


@api.post("/search", response=_SEARCH_RESPONSES, tags=["search"], summary="Search with a JSON body")
def search_post(request, body: SearchIn):
    return _search(body)


@api.post("/vsearch", response=_SEARCH_RESPONSES, tags=["search"], summary="Semantic (vector) search")
def vsearch_post(request, body: SearchIn):
    return _search(body, mode=Mode.VECTOR)


@api.post("/query", response=_SEARCH_RESPONSES, tags=["search"],
          summary="Hybrid search: expansion, BM25 + vectors, fusion, re-ranking")
def query_post(request, body: SearchIn):
    return _search(body, mode=Mode.HYBRID)


# --- documents -------------------------------------------------------------------------------


class DocumentOut(Schema):
    docid: str
    uri: str
    collection: str
    path: str
    title: str
    from_line: int
    lines: list[str]
    total_lines: int
    context: list[str]
    frontmatter: dict[str, Any]


@api.get("/get", response={200: DocumentOut, 401: ErrorOut, 404: ErrorOut, 422: ErrorOut}, tags=["documents"],
         summary="One document by path, pmd://collection/path or #docid (optionally :LINE)")
def document_get(request, ref: str = Query(..., min_length=1, max_length=4096),
                 from_line: int | None = Query(None, ge=1), max_lines: int | None = Query(None, ge=0),
                 collection: list[str] = Query(default_factory=list)):
    from indexing.selectors import document_page

    page = document_page(ref, from_line=from_line, max_lines=max_lines, collections=collection)
    return {**page.as_dict(), "total_lines": page.total_lines}


class MultiGetDocOut(Schema):
    docid: str
    uri: str
    title: str
    skipped: str | None
    truncated: bool
    text: str | None


class MultiGetOut(Schema):
    documents: list[MultiGetDocOut]
    missing: list[str]
    omitted: int = Field(0, description="matching documents not listed: the total response limit was used up")
    total_bytes: int = Field(0, description="bytes of this answer counted against max_total_bytes")
    max_bytes: int
    max_total_bytes: int = Field(..., description="PMD_MULTI_GET_MAX_TOTAL_BYTES")
    notice: str | None = Field(None, description="what the limits left out, in one line")


@api.get("/multi-get", response={200: MultiGetOut, 401: ErrorOut, 422: ErrorOut}, tags=["documents"],
         summary="Several documents: a glob over collection/path, or a comma list of paths and #docids")
def documents_multi_get(request, pattern: str = Query(..., min_length=1, max_length=10000),
                        max_bytes: int | None = Query(None, ge=1, description="skip larger documents; default 10240, "
                                                      "at most max_total_bytes"),
                        max_lines: int | None = Query(None, ge=0),
                        collection: list[str] = Query(default_factory=list)):
    from indexing.selectors import documents_multi_get as multi_get

    result = multi_get(pattern, max_bytes=max_bytes, max_lines=max_lines, collections=collection or None)
    return result.as_dict()


# --- collections ---------------------------------------------------------------------------

collections_router = Router(tags=["collections"])


class CollectionOut(Schema):
    name: str
    uri: str
    path: str | None = Field(None, description="the folder on the server (staff only)")
    mask: str
    documents: int
    inactive: int
    problems: int
    last_indexed_at: str | None


def _collection_row(row: dict, *, staff: bool) -> dict:
    """Where a collection lives on the server is an internal: members see its name and counts."""
    return {"name": row["name"], "uri": f"pmd://{row['name']}/", "path": row["path"] if staff else None,
            "mask": row["mask"],
            "documents": row["documents"], "inactive": row["inactive"], "problems": row["problems"],
            "last_indexed_at": row["last_indexed_at"].isoformat() if row["last_indexed_at"] else None}


def _collection_overview(name: str, *, staff: bool) -> dict:
    from indexing.selectors import collection_detail
    from indexing.services.collections import collection_get

    return _collection_row(collection_detail(collection_get(name)), staff=staff)  # unknown → 404 with suggestions


@collections_router.get("", response=list[CollectionOut], summary="Collections with document counts")
@paginate(LimitOffsetPagination)
def collections_list(request):
    from indexing.selectors import collections_overview

    staff = getattr(request.auth, "is_staff", False)
    return [_collection_row(r, staff=staff) for r in sorted(collections_overview(), key=lambda r: r["name"])]


class CollectionIn(Schema):
    path: str = Field(..., min_length=1, max_length=4096, description="folder on the server")
    name: str | None = Field(None, max_length=200)
    mask: str | None = Field(None, max_length=500)
    ignore: list[str] = []
    index: bool = Field(True, description="index it right away (a job)")


class JobOut(Schema):
    id: str
    kind: str
    collection: str | None
    state: str
    done: int
    total: int
    percent: int
    message: str
    result: dict[str, Any]
    created_at: str
    started_at: str | None
    finished_at: str | None


def _job_row(job) -> dict:
    def iso(value):
        return value.isoformat() if value else None

    return {"id": str(job.id), "kind": job.kind, "collection": job.collection.name if job.collection else None,
            "state": job.state, "done": job.done, "total": job.total, "percent": job.percent,
            "message": job.message, "result": job.result, "created_at": iso(job.created_at),
            "started_at": iso(job.started_at), "finished_at": iso(job.finished_at)}


class CollectionCreatedOut(Schema):
    collection: CollectionOut
    job: JobOut | None


def _started(job) -> dict:
    job.refresh_from_db()  # eager tasks or a fast thread may have moved it on
    return _job_row(job)


@collections_router.post("", response={201: CollectionCreatedOut, 400: ErrorOut, 403: ErrorOut, 409: ErrorOut},
                         summary="Add a folder as a collection (staff)")
def collection_add(request, body: CollectionIn):
    from django.conf import settings

    _require_staff(request)
    added = add_collection(path=body.path, name=body.name, mask=body.mask, ignore_patterns=body.ignore,
                           allowed_roots=settings.PMD_COLLECTION_ROOTS, index="job" if body.index else "no",
                           created_by=request.auth)
    return Status(201, {"collection": _collection_overview(added.collection.name, staff=True),
                        "job": _started(added.job) if added.job else None})


@collections_router.get("/{name}", response={200: CollectionOut, 404: ErrorOut})
def collection_detail(request, name: str):
    return _collection_overview(name, staff=getattr(request.auth, "is_staff", False))


class CollectionPatch(Schema):
    name: str = Field(..., min_length=1, max_length=200, description="the new name")


@collections_router.patch("/{name}", response={200: CollectionOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut,
                                               409: ErrorOut}, summary="Rename a collection (staff)")
def collection_rename(request, name: str, body: CollectionPatch):
    from indexing.services.collections import collection_rename as rename

    _require_staff(request)
    renamed = rename(name=name, new_name=body.name)
    return _collection_overview(renamed.name, staff=True)


class DeletedOut(Schema):
    deleted: str
    documents: int


@collections_router.delete("/{name}", response={200: DeletedOut, 403: ErrorOut, 404: ErrorOut},
                           summary="Remove a collection and its documents from the index (staff)")
def collection_delete(request, name: str):
    from indexing.services.collections import collection_remove

    _require_staff(request)
    return {"deleted": name, "documents": collection_remove(name=name)}


@collections_router.post("/{name}/reindex", response={202: JobOut, 403: ErrorOut, 404: ErrorOut},
                         summary="Re-scan the folder (staff); returns a job to follow at /api/jobs/{id}")
def collection_reindex(request, name: str):
    from indexing.services.collections import collection_get

    _require_staff(request)
    return Status(202, _started(index_request(collection=collection_get(name), created_by=request.auth)))


@collections_router.post("/{name}/embed", response={202: JobOut, 403: ErrorOut, 404: ErrorOut, 503: ErrorOut},
                         summary="Compute missing embeddings (staff); returns a job")
def collection_embed(request, name: str, force: bool = False):
    from indexing.services.collections import collection_get

    _require_staff(request)
    collection = collection_get(name)
    return Status(202, _started(embedding_request(collection=collection, force=force, created_by=request.auth)))


api.add_router("/collections", collections_router)


JobState = Literal["queued", "running", "done", "failed"]


# --- jobs --------------------------------------------------------------------------------------


@api.get("/jobs", response=list[JobOut], tags=["jobs"],
         summary="Recent jobs, newest first (staff: all; others: the jobs they started)")
@paginate(LimitOffsetPagination)
def jobs_list(request, state: JobState | None = None):
    from indexing.selectors import jobs_visible_to

    qs = jobs_visible_to(request.auth)
    if state:
        qs = qs.filter(state=state)
    return [_job_row(j) for j in qs[:1000]]


@api.get("/jobs/{job_id}", response={200: JobOut, 404: ErrorOut}, tags=["jobs"], summary="Progress of one job")
def job_detail(request, job_id: str):
    import uuid

    from indexing.models import Job
    from indexing.selectors import jobs_visible_to

    try:  # someone else's job is as absent as a job that never existed
        job = jobs_visible_to(request.auth).get(pk=uuid.UUID(job_id))
    except (ValueError, Job.DoesNotExist):
        raise JobNotFound(f"no job {job_id}") from None
    return _job_row(job)


# --- contexts ----------------------------------------------------------------------------------


class ContextOut(Schema):
    target: str
    text: str


class ContextIn(Schema):
    target: str = Field("/", max_length=4096, description="/ (global), pmd://collection/prefix or collection/prefix")
    text: str = Field(..., min_length=1, max_length=20000)


@api.get("/contexts", response=list[ContextOut], tags=["contexts"])
@paginate(LimitOffsetPagination)
def contexts_list(request):
    from indexing.selectors import context_list

    return [{"target": c.target, "text": c.text} for c in context_list()]


@api.put("/contexts", response={200: ContextOut, 400: ErrorOut, 403: ErrorOut, 404: ErrorOut}, tags=["contexts"],
         summary="Set the context text at a target (staff)")
def context_put(request, body: ContextIn):
    from indexing.services.contexts import context_set

    _require_staff(request)
    context = context_set(target=body.target, text=body.text)
    return {"target": context.target, "text": context.text}


@api.delete("/contexts", response={200: dict, 403: ErrorOut, 404: ErrorOut}, tags=["contexts"],
            summary="Remove the context at a target (staff)")
def context_delete(request, target: str = Query(..., min_length=1, max_length=4096)):
    from indexing.services.contexts import context_remove

    _require_staff(request)
    return {"deleted": context_remove(target=target)}


# --- status ------------------------------------------------------------------------------------


@api.get("/status", response=dict, tags=["status"],
         summary="Database, index, workers, models, problems (where things run: staff only)")
def status(request, section: list[str] = Query(default_factory=list)):
    from pmd_site.status import status_report

    return status_report(section or None, internals=bool(getattr(request.auth, "is_staff", False)))
