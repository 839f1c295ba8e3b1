"""The search page: one search through the dispatcher, its results as cards or a problem state."""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import HttpResponseNotFound, HttpResponseRedirect, JsonResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET, require_POST

from indexing.access import visible_collection_names
from indexing.errors import EmptyQuery, InvalidSearchInput, PmdError
from indexing.selectors import _visible_documents
from indexing.services.model_server import model_server_problem
from indexing.services.search_log import search_feedback_record
from pmd_site.web.errors import problem_for
from pmd_site.web.forms import ASK, MODE_LABELS, SORT_LABELS, WEB_LIMIT, SearchForm
from pmd_site.web.pages import access_of, page, wants_fragment
from pmd_site.web.rendering import highlight_snippet
from search import (
    TYPE_NAMES,
    SearchRequest,
    SearchResult,
    answer_model,
    filters_from_options,
    query_suggestions,
    search_run,
    shows_dates,
)

log = logging.getLogger(__name__)

FACETS_FIRST = 10  # tag facets in view on a results page; the others behind "more", with a filter box
FACETS_SHOWN = 100  # tag facets on a results page in all; the rest is counted ("and N more tags")
CARD_TAGS_SHOWN = 12  # tags on one result card; the rest is counted


@dataclass
class TagLink:
    """A tag shown as a link that filters the search by it (a facet, or a tag on a card or a note)."""

    name: str
    url: str
    count: int = 0
    active: bool = False


def _tag_token(tag: str) -> str:
    return f'tag:"{tag}"' if re.search(r'[\s,"]', tag) else f"tag:{tag}"


def _has_tag(query: str, tag: str) -> bool:
    return re.search(r'(?<![\S])tag:"?' + re.escape(tag) + r'"?(?=\s|$)', query, re.IGNORECASE) is not None


def _query_tags(query: str) -> set[str]:
    """The tags a query already filters by (lower case), read once: a note may carry thousands."""
    return {(quoted or bare).lower() for quoted, bare in re.findall(r'(?<!\S)tag:(?:"([^"]*)"|(\S+))', query)}


def search_url(params: dict) -> str:
    """The search page for these parameters (only those set)."""
    shown = {
        k: v
        for k, v in params.items()
        if v and not (k == "mode" and v == "keyword") and not (k == "sort" and v == "relevance")
    }
    return reverse("search:search") + ("?" + urlencode(shown) if shown else "")


def tag_search_url(tag: str, params: dict | None = None) -> str:
    """The search page with `tag:x` added to the query of `params` (kept as it is when already there)."""
    params = dict(params or {})
    query = params.get("q", "") or ""
    if not _has_tag(query, tag):
        query = f"{query} {_tag_token(tag)}".strip()
    params["q"] = query
    return search_url(params)


def _tags_by_document(results: list[SearchResult], access) -> dict[tuple[str, str], list[str]]:
    """The tags of the results' notes, in one query, among the notes `access` sees."""
    if not results:
        return {}
    wanted = Q()
    for r in {(r.collection, r.path) for r in results}:
        wanted |= Q(collection__name=r[0], path=r[1])
    rows = _visible_documents(access).filter(active=True).filter(wanted).values_list("collection__name", "path", "tags")
    return {(c, p): list(tags or []) for c, p, tags in rows}


@dataclass
class TagFacets:
    """The most frequent tags of a results page (`shown`, each with its count) and how many others."""

    shown: list[TagLink] = field(default_factory=list)
    more: int = 0

    @property
    def first(self) -> list[TagLink]:
        """In view: the most frequent, and those the query filters by."""
        return [t for i, t in enumerate(self.shown) if i < FACETS_FIRST or t.active]

    @property
    def rest(self) -> list[TagLink]:
        """Behind the "more" control."""
        return [t for i, t in enumerate(self.shown) if i >= FACETS_FIRST and not t.active]

    def __bool__(self) -> bool:
        return bool(self.shown)

    def __iter__(self):
        return iter(self.shown)

    def __len__(self) -> int:
        return len(self.shown)


def tag_facets(tags_of: list[list[str]], params: dict) -> TagFacets:
    """Tags of the notes in the results (`tags_of`: one list per distinct note) with how many notes
    carry each, most frequent first, at most FACETS_SHOWN (tags already in the query among them)."""
    counts: Counter = Counter()
    for tags in tags_of:
        counts.update(set(tags))
    query = params.get("q", "") or ""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ranked[:FACETS_SHOWN]
    if len(ranked) > FACETS_SHOWN:
        wanted = _query_tags(query)
        active = [kv for kv in ranked[FACETS_SHOWN:] if kv[0].lower() in wanted][:FACETS_SHOWN]
        shown = sorted(ranked[: FACETS_SHOWN - len(active)] + active, key=lambda kv: (-kv[1], kv[0]))
    return TagFacets(
        shown=[
            TagLink(name=name, url=tag_search_url(name, params), count=n, active=_has_tag(query, name))
            for name, n in shown
        ],
        more=len(ranked) - len(shown),
    )


def card_tags(tags: list[str], params: dict) -> tuple[list[TagLink], int]:
    """The tags shown on one result card (those in the query first), at most CARD_TAGS_SHOWN, and how
    many more the note has."""
    query = params.get("q", "") or ""
    tags = list(dict.fromkeys(tags))
    if len(tags) > CARD_TAGS_SHOWN and (wanted := _query_tags(query)):
        active = [t for t in tags if t.lower() in wanted][:CARD_TAGS_SHOWN]
        first = set(active)
        tags = active + [t for t in tags if t not in first]
    shown = tags[:CARD_TAGS_SHOWN]
    return (
        [TagLink(name=t, url=tag_search_url(t, params), active=_has_tag(query, t)) for t in shown],
        len(tags) - len(shown),
    )


_TYPE_TOKEN = re.compile(r'(?<!\S)type:"?([\w,]+)"?(?=\s|$)', re.IGNORECASE)


def _file_types(value: str) -> list[str] | None:
    """The file types of a `type:` value (`pdf,docx`), or None when it names a frontmatter field's value."""
    kinds = [TYPE_NAMES.get(kind.lower()) for kind in value.split(",") if kind]
    return kinds if kinds and all(kinds) else None


def _query_types(query: str) -> set[str]:
    return {kind for value in _TYPE_TOKEN.findall(query) for kind in (_file_types(value) or ())}


def type_search_url(kind: str, params: dict) -> str:
    """The search page with the query's file type set to `type:kind` (a type in place of another:
    two `type:` words would ask for files of both types at once)."""
    params = dict(params)
    query = _TYPE_TOKEN.sub(lambda m: "" if _file_types(m.group(1)) else m.group(0), params.get("q", "") or "")
    params["q"] = f"{' '.join(query.split())} type:{kind}".strip()
    return search_url(params)


def type_facets(types: list[str], params: dict) -> list[TagLink]:
    """File types of the notes in the results (`types`: one per distinct note) with how many of each,
    most frequent first; none when all are of one type and the query does not ask for one."""
    counts = Counter(types)
    wanted = _query_types(params.get("q", "") or "")
    if len(counts) < 2 and not wanted:
        return []
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [TagLink(name=kind, url=type_search_url(kind, params), count=n, active=kind in wanted) for kind, n in ranked]


@dataclass
class ResultCard:
    result: SearchResult
    rank: int
    snippet_html: SafeString
    url: str
    tags: list[TagLink] = field(default_factory=list)
    tags_more: int = 0

    @property
    def context(self) -> str:
        return " › ".join(self.result.context[-2:])


def document_url(
    collection: str, path: str, *, line: int | None = None, query: str = "", search_id: int | None = None
) -> str:
    url = reverse("search:document", args=[collection, path])
    params = {}
    if line:
        params["line"] = line
    if query:
        params["q"] = query
    if search_id:
        params["sid"] = search_id  # the search log notes the result opened
    if params:
        url += "?" + urlencode(params)
    return url + (f"#L{line}" if line else "")


def ask_context(*, query: str, collection: str, after: str, before: str, conversation: str, started: bool) -> dict:
    """What the search page shows in Ask mode: how to set a model up, a hint, or the stream to open."""
    try:
        answer_model()  # no model: say how to set one
    except PmdError as exc:
        return {"problem": problem_for(exc, search=True), "ask": True}
    if not (query and started):
        return {"ask": True, "ask_hint": True}
    params = {
        k: v
        for k, v in {
            "q": query,
            "collection": collection,
            "after": after,
            "before": before,
            "conversation": conversation,
        }.items()
        if v
    }
    return {"ask": True, "ask_stream": reverse("search:ask_stream") + "?" + urlencode(params)}


def _run_search(
    *,
    query: str,
    mode: str,
    collection: str,
    access,
    sort: str = "relevance",
    after: str = "",
    before: str = "",
    exact: bool = False,
    words: bool = False,
    typing: bool = False,
) -> dict:
    # The query text may hold filters (tag:db, after:"last week", status:draft): search_run reads them;
    # the date range inputs are structured filters, merged with them.
    started = time.perf_counter()
    params = {"q": query, "mode": mode, "collection": collection, "sort": sort, "after": after, "before": before}
    try:
        filters = filters_from_options(after=after or None, before=before or None) if (after or before) else None
        search_request = SearchRequest(
            query=query,
            mode=mode,
            limit=WEB_LIMIT,  # search_run maps the web name to its Mode
            collections=[collection] if collection else [],
            access=access,
            sort=sort,
            filters=filters,
            correct=not exact,
            time_words=not words,
            face="web",
            typing=typing,
        )
        response = search_run(search_request)
    except EmptyQuery:  # nothing asked yet (or the query was cleared): the page's empty state
        return {"searched": False}
    except Exception as exc:  # every failure becomes a state the page explains
        log.info("web search failed (%s): %s", mode, exc, exc_info=not isinstance(exc, ValueError))
        problem = problem_for(exc, search=True)
        found = {"problem": problem, "elapsed_ms": (time.perf_counter() - started) * 1000}
        if problem.kind == "no-embeddings":  # say before "Run embedding" is pressed whether it can run
            blocked = model_server_problem()
            found["embedding_blocked"] = blocked.message if blocked is not None else ""
        return found
    tags = _tags_by_document(response.results, access)
    elapsed = (time.perf_counter() - started) * 1000
    cards = []
    for i, r in enumerate(response.results, start=1):
        shown, more = card_tags(tags.get((r.collection, r.path), []), params)
        cards.append(
            ResultCard(
                result=r,
                rank=i,
                snippet_html=highlight_snippet(r.text, r.text_highlights),
                url=document_url(r.collection, r.path, line=r.line, query=query, search_id=response.search_id),
                tags=shown,
                tags_more=more,
            )
        )
    notes = {(r.collection, r.path): r.type for r in response.results}
    return {
        "cards": cards,
        "tag_facets": tag_facets([tags.get(key, []) for key in notes], params),
        "type_facets": type_facets(list(notes.values()), params),
        "warnings": response.warnings,
        "elapsed_ms": elapsed,
        "timings": response.timings,
        "dated": shows_dates(response),
        "corrected": (
            {
                "query": response.corrected_query,
                "url": search_url({**params, "q": response.corrected_query}),
                "instead_url": search_url({**params, "exact": "1"}),
            }
            if response.corrected_query
            else None
        ),
        "time_words": (
            {"phrase": response.time_words, "remove_url": search_url({**params, "words": "1"})}
            if response.time_words
            else None
        ),
        "filtered": response.filters.describe() if response.filters is not None else "",
        "search_id": response.search_id,
    }


@login_required
@require_GET
def search_page(request):
    names = visible_collection_names(access_of(request))
    form = SearchForm(request.GET, collection_names=names)
    context = {
        "form": form,
        "collections": names,
        "modes": MODE_LABELS,
        "sorts": SORT_LABELS,
        "query": "",
        "mode": "keyword",
        "collection": "",
        "sort": "relevance",
        "after": "",
        "before": "",
        "searched": False,
    }
    if form.is_valid():
        context.update(
            query=form.cleaned_data["q"],
            mode=form.cleaned_data["mode"],
            collection=form.cleaned_data["collection"],
            sort=form.cleaned_data["sort"],
            after=form.cleaned_data["after"],
            before=form.cleaned_data["before"],
        )
        context["searched"] = True
        if context["mode"] == ASK:
            # Typing does not ask (each question costs a model's answer): Enter, a link or a reload does.
            typing = request.headers.get("HX-Trigger") == "q"
            conversation = form.cleaned_data.get("conversation")
            context.update(
                ask_context(
                    query=context["query"],
                    collection=context["collection"],
                    after=context["after"],
                    before=context["before"],
                    conversation=str(conversation) if conversation else "",
                    started=not typing,
                )
            )
            template = "web/_ask.html" if wants_fragment(request, "results") else "web/search.html"
            return page(request, template, context)
        context.update(
            _run_search(
                query=context["query"],
                mode=context["mode"],
                collection=context["collection"],
                access=access_of(request),
                sort=context["sort"],
                after=context["after"],
                before=context["before"],
                exact=form.cleaned_data["exact"],
                words=form.cleaned_data["words"],
                typing=request.headers.get("HX-Trigger") == "q",
            )
        )
    else:
        context["mode"] = request.GET.get("mode") if request.GET.get("mode") in MODE_LABELS else "keyword"
        context["query"] = request.GET.get("q", "")[:1000]
        context["problem"] = problem_for(
            InvalidSearchInput("; ".join(e for errs in form.errors.values() for e in errs)), search=True
        )
    template = "web/_results.html" if wants_fragment(request, "results") else "web/search.html"
    response = page(request, template, context)
    if wants_fragment(request, "results") and not context["query"].strip() and not context.get("searched"):
        # the box cleared: the address says so, without a history entry of its own (Back goes to
        # the search before)
        response.headers["HX-Replace-Url"] = reverse("search:search")
    if "elapsed_ms" in context:
        response.headers["Server-Timing"] = f"search;dur={context['elapsed_ms']:.1f}"
    return response


@login_required
@require_GET
def search_suggestions(request):
    """The search box's completions of the filter being typed (keys, tags, values), as JSON for pmd.js."""
    collection = request.GET.get("collection", "")[:200]
    try:
        found = query_suggestions(
            access=access_of(request),
            text=request.GET.get("q", "")[:1000],
            collections=[collection] if collection else None,
        )
    except PmdError:  # a collection this user does not see: nothing to offer
        found = []
    return JsonResponse({"suggestions": [{"text": s.text, "label": s.label, "hint": s.hint} for s in found]})


@login_required
@require_POST
def result_feedback(request):
    """A thumbs up or down on a result (the search log keeps it with the search; only the searcher's own)."""
    sid, uri, vote = request.POST.get("sid", ""), request.POST.get("uri", "")[:4200], request.POST.get("helpful", "")
    recorded = (
        sid.isdigit()
        and uri.startswith("pmd://")
        and vote in ("1", "0")
        and search_feedback_record(access=access_of(request), entry_id=int(sid), uri=uri, helpful=vote == "1")
    )
    if wants_fragment(request):
        return page(
            request,
            "web/_feedback.html",
            {"sid": sid, "uri": uri, "voted": vote if recorded else "", "recorded": recorded},
            status=200 if recorded else 404,
        )
    back = request.headers.get("Referer", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        back = reverse("search:search")
    return HttpResponseRedirect(back) if recorded else HttpResponseNotFound("no such search of yours")
