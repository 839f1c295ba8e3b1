"""The search page: one search through the dispatcher, its results as cards or a problem state."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.urls import reverse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from indexing.access import visible_collection_names
from indexing.errors import InvalidSearchInput
from search.formatters import shows_dates
from search.pipeline.dispatch import search_run
from search.request import SearchRequest
from search.results import SearchResult
from search.web.errors import problem_for
from search.web.forms import MODE_LABELS, SORT_LABELS, WEB_LIMIT, SearchForm
from search.web.pages import access_of, page, wants_fragment
from search.web.rendering import highlight_snippet

log = logging.getLogger(__name__)


@dataclass
class ResultCard:
    result: SearchResult
    rank: int
    snippet_html: SafeString
    url: str

    @property
    def context(self) -> str:
        return " › ".join(self.result.context[-2:])


def document_url(collection: str, path: str, *, line: int | None = None, query: str = "") -> str:
    url = reverse("search:document", args=[collection, path])
    params = {}
    if line:
        params["line"] = line
    if query:
        params["q"] = query
    if params:
        url += "?" + urlencode(params)
    return url + (f"#L{line}" if line else "")


def _run_search(*, query: str, mode: str, collection: str, access, sort: str = "relevance") -> dict:
    # The query text may hold filters (tag:db, after:"last week", status:draft): search_run reads them.
    search_request = SearchRequest(
        query=query, mode=mode, limit=WEB_LIMIT,  # search_run maps the web name to its Mode
        collections=[collection] if collection else [], access=access, sort=sort,
    )
    started = time.perf_counter()
    try:
        response = search_run(search_request)
    except Exception as exc:  # noqa: BLE001 - every failure becomes a state the page explains
        log.info("web search failed (%s): %s", mode, exc, exc_info=not isinstance(exc, ValueError))
        return {"problem": problem_for(exc, search=True), "elapsed_ms": (time.perf_counter() - started) * 1000}
    elapsed = (time.perf_counter() - started) * 1000
    cards = [
        ResultCard(
            result=r, rank=i,
            snippet_html=highlight_snippet(r.snippet, r.highlights),
            url=document_url(r.collection, r.path, line=r.line, query=query),
        )
        for i, r in enumerate(response.results, start=1)
    ]
    return {"cards": cards, "warnings": response.warnings, "elapsed_ms": elapsed, "timings": response.timings,
            "dated": shows_dates(response),
            "filtered": response.filters.describe() if response.filters is not None else ""}


@login_required
@require_GET
def search_page(request):
    names = visible_collection_names(access_of(request))
    form = SearchForm(request.GET, collection_names=names)
    context = {"form": form, "collections": names, "modes": MODE_LABELS, "sorts": SORT_LABELS, "query": "",
               "mode": "keyword", "collection": "", "sort": "relevance", "searched": False}
    if form.is_valid():
        context.update(query=form.cleaned_data["q"], mode=form.cleaned_data["mode"],
                       collection=form.cleaned_data["collection"], sort=form.cleaned_data["sort"])
        if context["query"]:
            context["searched"] = True
            context.update(_run_search(query=context["query"], mode=context["mode"],
                                       collection=context["collection"], access=access_of(request),
                                       sort=context["sort"]))
    else:
        context["mode"] = request.GET.get("mode") if request.GET.get("mode") in MODE_LABELS else "keyword"
        context["query"] = request.GET.get("q", "")[:1000]
        context["problem"] = problem_for(
            InvalidSearchInput("; ".join(e for errs in form.errors.values() for e in errs)), search=True)
    template = "search/_results.html" if wants_fragment(request, "results") else "search/search.html"
    response = page(request, template, context)
    if "elapsed_ms" in context:
        response.headers["Server-Timing"] = f"search;dur={context['elapsed_ms']:.1f}"
    return response
