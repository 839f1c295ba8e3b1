"""The browser UI: thin views over the search services and the indexing selectors.

Views parse input (search.web.forms), call one service or selector, and render a template.
htmx requests that target a fragment get the fragment only; everything else gets the
full page, so every URL can be shared, reloaded and used without JavaScript.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from functools import wraps
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_POST

from indexing.errors import PmdError
from indexing.models import Collection, FileProblem, Job
from indexing.services.background import embedding_request, index_request
from indexing.services.refresh import collection_add as add_collection
from search.web.forms import MODE_LABELS, WEB_LIMIT, CollectionAddForm, SearchForm, TokenCreateForm
from search.web.rendering import highlight_snippet, render_markdown
from search.request import SearchRequest
from search.results import SearchResult

log = logging.getLogger(__name__)


def _page(request, template: str, context: dict, *, status: int = 200) -> HttpResponse:
    response = render(request, template, context, status=status)
    # The Content-Security-Policy comes from pmd_site.security's middleware, for every page.
    patch_vary_headers(response, ["HX-Request", "HX-Target"])
    return response


def _wants_fragment(request, target: str) -> bool:
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request and htmx.target == target


def staff_required(view):
    """Collection management is for staff; others get a 403 that says so."""

    @wraps(view)
    @login_required
    def wrapper(request, *args, **kwargs):
        if not request.user.is_staff:
            raise PermissionDenied("managing collections needs a staff account")
        return view(request, *args, **kwargs)

    return wrapper


# --- search ---------------------------------------------------------------------------


@dataclass
class ResultCard:
    result: SearchResult
    rank: int
    snippet_html: SafeString
    url: str

    @property
    def context(self) -> str:
        return " › ".join(self.result.context[-2:])


@dataclass
class SearchProblem:
    kind: str  # backend | no-embeddings | invalid | error
    title: str
    detail: str


# How the search page explains a service error, by its code (indexing.errors); others by status.
SEARCH_PROBLEMS = {
    "llm_backend_unavailable": ("backend", "The language model server is not reachable"),
    "llm_backend_timeout": ("backend", "The language model server is not reachable"),
    "llm_model_missing": ("backend", "The embedding model is not available"),
    "not_embedded": ("no-embeddings", "No embeddings yet"),
}


def _classify_error(exc: Exception) -> SearchProblem:
    """The web UI's one mapping of a failed search to the state its page shows."""
    name = exc.__class__.__name__
    text = str(exc) or name
    if isinstance(exc, PmdError):
        if exc.code in SEARCH_PROBLEMS:
            return SearchProblem(*SEARCH_PROBLEMS[exc.code], text)
        if exc.http_status < 500:
            return SearchProblem("invalid", "This search cannot run", text)
    elif isinstance(exc, ValueError):
        return SearchProblem("invalid", "This search cannot run", text)
    return SearchProblem("error", "Search failed", f"{name}: {text}")


def _document_url(collection: str, path: str, *, line: int | None = None, query: str = "") -> str:
    url = reverse("search:document", args=[collection, path])
    params = {}
    if line:
        params["line"] = line
    if query:
        params["q"] = query
    if params:
        url += "?" + urlencode(params)
    return url + (f"#L{line}" if line else "")


def _run_search(*, query: str, mode: str, collection: str) -> dict:
    from search.pipeline.dispatch import search_run

    search_request = SearchRequest(
        query=query, mode=mode, limit=WEB_LIMIT,  # search_run maps the web name to its Mode
        collections=[collection] if collection else [],
    )
    started = time.perf_counter()
    try:
        response = search_run(search_request)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a state the page explains
        log.info("web search failed (%s): %s", mode, exc, exc_info=not isinstance(exc, ValueError))
        return {"problem": _classify_error(exc), "elapsed_ms": (time.perf_counter() - started) * 1000}
    elapsed = (time.perf_counter() - started) * 1000
    cards = [
        ResultCard(
            result=r, rank=i,
            snippet_html=highlight_snippet(r.snippet, r.highlights),
            url=_document_url(r.collection, r.path, line=r.line, query=query),
        )
        for i, r in enumerate(response.results, start=1)
    ]
    return {"cards": cards, "warnings": response.warnings, "elapsed_ms": elapsed, "timings": response.timings}


@login_required
@require_GET
def search_page(request):
    names = list(Collection.objects.values_list("name", flat=True))
    form = SearchForm(request.GET, collection_names=names)
    context = {"form": form, "collections": names, "modes": MODE_LABELS, "query": "", "mode": "keyword",
               "collection": "", "searched": False}
    if form.is_valid():
        context.update(query=form.cleaned_data["q"], mode=form.cleaned_data["mode"],
                       collection=form.cleaned_data["collection"])
        if context["query"]:
            context["searched"] = True
            context.update(_run_search(query=context["query"], mode=context["mode"],
                                       collection=context["collection"]))
    else:
        context["mode"] = request.GET.get("mode") if request.GET.get("mode") in MODE_LABELS else "keyword"
        context["query"] = request.GET.get("q", "")[:1000]
        context["problem"] = SearchProblem("invalid", "This search cannot run",
                                           "; ".join(e for errs in form.errors.values() for e in errs))
    template = "search/_results.html" if _wants_fragment(request, "results") else "search/search.html"
    response = _page(request, template, context)
    if "elapsed_ms" in context:
        response.headers["Server-Timing"] = f"search;dur={context['elapsed_ms']:.1f}"
    return response


# --- documents ------------------------------------------------------------------------


def _resolve(collection: str, path: str):
    from indexing.selectors import DocumentNotFound, document_resolve

    try:
        return document_resolve(f"pmd://{collection}/{path}").document
    except DocumentNotFound as exc:
        raise Http404(str(exc)) from None


def _display_value(value) -> str:
    if isinstance(value, list):
        return ", ".join(_display_value(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_display_value(v)}" for k, v in value.items())
    return "" if value is None else str(value)


@login_required
@require_GET
def document_page(request, collection: str, path: str):
    from indexing.selectors import contexts_for

    document = _resolve(collection, path)
    body = document.content.body
    view = "source" if request.GET.get("view") == "source" else "rendered"
    try:
        line = int(request.GET.get("line", "0"))
    except ValueError:
        line = 0
    lines = body.splitlines()
    context = {
        "document": document,
        "collection": document.collection,
        "contexts": contexts_for(document.collection, document.path),
        "frontmatter": [(k, _display_value(v)) for k, v in sorted(document.frontmatter.items())]
        if isinstance(document.frontmatter, dict) else [],
        "view": view,
        "line": line if 0 < line <= max(1, len(lines)) else 0,
        "query": request.GET.get("q", "")[:1000],
        "line_count": len(lines),
        "raw_url": reverse("search:raw", args=[document.collection.name, document.path]),
    }
    if view == "source":
        context["numbered_lines"] = list(enumerate(lines, start=1))
    else:
        context["html"], context["frontmatter_lines"] = render_markdown(body)
    return _page(request, "search/document.html", context)


@login_required
@require_GET
def document_raw(request, collection: str, path: str):
    document = _resolve(collection, path)
    response = HttpResponse(document.content.body, content_type="text/plain; charset=utf-8")
    response.headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@login_required
@require_GET
def docid_redirect(request, docid: str):
    from indexing.selectors import DocumentNotFound, document_resolve

    try:
        document = document_resolve(f"#{docid}").document
    except DocumentNotFound as exc:
        raise Http404(str(exc)) from None
    return redirect(_document_url(document.collection.name, document.path))


# --- collections and jobs -----------------------------------------------------------------


def _collection_rows(user) -> list[dict]:
    from indexing.selectors import collections_overview, jobs_visible_to

    rows = collections_overview()
    from indexing.services.embedding import embedding_status

    latest: dict[int, Job] = {}
    for job in jobs_visible_to(user).filter(collection__isnull=False).order_by("-created_at")[:200]:
        latest.setdefault(job.collection_id, job)
    for row in rows:
        row["job"] = latest.get(row["collection"].id)
        row["embedded"] = row["stale"] = None
        row["file_problems"] = (
            list(FileProblem.objects.filter(collection=row["collection"])[:50])
            if row["problems"] and row["job"] and row["job"].finished else []
        )
    for row in rows:
        try:
            status = embedding_status(collections=[row["name"]])
        except Exception as exc:  # noqa: BLE001 - counts are decoration; the page must render
            log.warning("embedding counts unavailable: %s", exc)
            break
        row["embedded"], row["stale"] = status.get("embedded"), status.get("pending")
    return rows


def _start_job(kind: str, collection: Collection, user) -> Job:
    """Indexing or embedding through the services (a worker, or a background thread without one)."""
    if kind == Job.Kind.EMBED:
        return embedding_request(collection=collection, created_by=user)
    return index_request(collection=collection, created_by=user)


def _collections_context(request, form: CollectionAddForm) -> dict:
    # Jobs for several collections at once (e.g. "embed everything") are shown above the table.
    from indexing.selectors import jobs_visible_to

    general = list(jobs_visible_to(request.user).filter(collection__isnull=True).order_by("-created_at")[:1])
    return {
        "rows": _collection_rows(request.user),
        "form": form,
        "general_jobs": [j for j in general if not j.finished or str(j.pk) == request.GET.get("job")],
    }


@login_required
@require_GET
def collections_page(request):
    return _page(request, "search/collections.html", _collections_context(request, CollectionAddForm()))


@staff_required
@require_POST
def embed_all(request):
    """The "run embedding" button of the search page's no-embeddings state."""
    job = embedding_request(created_by=request.user)
    return redirect(reverse("search:collections") + f"?job={job.pk}")


@staff_required
@require_POST
def collection_add(request):
    from django.conf import settings

    from indexing.services.collections import CollectionError

    form = CollectionAddForm(request.POST)
    if form.is_valid():
        try:
            collection = add_collection(
                path=form.cleaned_data["path"], name=form.cleaned_data["name"] or None,
                mask=form.cleaned_data["mask"] or None, allowed_roots=settings.PMD_COLLECTION_ROOTS,
                index="job", created_by=request.user,
            ).collection
        except CollectionError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, f"Added collection {collection.name}; indexing started.")
            return redirect("search:collections")
    return _page(request, "search/collections.html", _collections_context(request, form), status=400)


@staff_required
@require_POST
def collection_action(request, name: str, action: str):
    collection = get_object_or_404(Collection, name=name)
    kind = {"reindex": Job.Kind.INDEX, "embed": Job.Kind.EMBED}.get(action)
    if kind is None:
        raise Http404("unknown action")
    job = _start_job(kind, collection, request.user)
    if getattr(request, "htmx", None):
        return _job_fragment(request, job)
    messages.success(request, f"{action.capitalize()} of {collection.name} started.")
    return redirect("search:collections")


def _job_fragment(request, job: Job) -> HttpResponse:
    problems = []
    if job.finished and job.collection_id and job.kind in {Job.Kind.INDEX, Job.Kind.UPDATE}:
        problems = list(FileProblem.objects.filter(collection_id=job.collection_id)[:50])
    return _page(request, "search/_job.html", {"job": job, "problems": problems})


@login_required
@require_GET
def job_progress(request, job_id):
    from indexing.selectors import jobs_visible_to

    job = get_object_or_404(jobs_visible_to(request.user), pk=job_id)  # someone else's job: 404, not 403
    response = _job_fragment(request, job)
    if job.finished and getattr(request, "htmx", None) and request.GET.get("poll"):
        # The job a page was following just ended: reload it so its counts are current.
        response.headers["HX-Refresh"] = "true"
    return response


# --- status ----------------------------------------------------------------------------------


@login_required
@require_GET
def status_page(request):
    from pmd_site.status import status_report

    report = status_report(internals=request.user.is_staff)
    sections = []
    for name, data in report.items():
        scalars, tables = [], []
        for key, value in data.items():
            if key in {"ok", "error"}:
                continue
            if isinstance(value, list):
                if value and isinstance(value[0], dict):
                    columns = list(value[0].keys())
                    tables.append({"name": key, "columns": columns,
                                   "rows": [[row.get(c) for c in columns] for row in value]})
                elif value:
                    scalars.append((key, ", ".join(str(v) for v in value)))
            elif isinstance(value, dict):
                scalars.append((key, ", ".join(f"{k}={v}" for k, v in value.items())))
            else:
                scalars.append((key, value))
        sections.append({"name": name, "ok": data.get("ok", True), "error": data.get("error"),
                         "wide": any(len(t["columns"]) > 3 for t in tables),
                         "scalars": scalars, "tables": tables})
    return _page(request, "search/status.html", {"sections": sections})


# --- API tokens ---------------------------------------------------------------------------------
# Everyone manages only their own tokens here (staff too; the admin lists everybody's).


def _tokens_context(request, form: TokenCreateForm, created=None) -> dict:
    from search.api_tokens import token_list

    return {
        "tokens": token_list(user=request.user, include_revoked=True),
        "form": form,
        "created": created,
        "api_url": request.build_absolute_uri("/api/status"),
        "mcp_url": request.build_absolute_uri("/mcp"),  # pmd_site.asgi.MCP_PATH
    }


@login_required
@require_GET
def tokens_page(request):
    return _page(request, "search/tokens.html", _tokens_context(request, TokenCreateForm()))


@login_required
@require_POST
def token_add(request):
    """Create a token; the raw value is in this one response only (no redirect, never cached)."""
    from search.api_tokens import TokenError, token_create

    form = TokenCreateForm(request.POST)
    created = None
    if form.is_valid():
        try:
            created = token_create(user=request.user, name=form.cleaned_data["name"])
        except TokenError as exc:
            form.add_error(None, str(exc))
    response = _page(request, "search/tokens.html",
                     _tokens_context(request, TokenCreateForm() if created else form, created),
                     status=200 if created else 400)
    response.headers["Cache-Control"] = "no-store"
    return response


@login_required
@require_POST
def token_remove(request, token_id: int):
    from search.api_tokens import TokenError, token_revoke

    try:
        token = token_revoke(token=token_id, user=request.user)
    except TokenError:
        raise Http404("no such token") from None
    messages.success(request, f"Revoked token {token.prefix}… {token.name}".rstrip() + ".")
    return redirect("search:tokens")
