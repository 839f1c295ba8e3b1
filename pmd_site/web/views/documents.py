"""A document's page (rendered or source, with its contexts), its raw text, its related notes, and
/d/<docid> links.

A reference to nothing indexed is the selectors' DocumentNotFound: a 404 page (pmd_site.web.errors).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET

from indexing.links import document_links
from indexing.selectors import contexts_for, document_resolve
from search.retrieval.related import related_notes
from pmd_site.web.pages import access_of, page, wants_fragment
from pmd_site.web.rendering import render_markdown
from pmd_site.web.views.search import TagLink, document_url, tag_search_url

LINKS_SHOWN = 200  # of each kind; the totals say when there are more
RELATED_SHOWN = 10


def _resolve(request, collection: str, path: str):
    return document_resolve(f"pmd://{collection}/{path}", access=access_of(request)).document


def _link_items(document, access) -> dict:
    """The note's outgoing links (resolved ones to the target's page) and backlinks (to the linking
    line of the source note), among the notes `access` sees."""
    links = document_links(f"pmd://{document.collection.name}/{document.path}", access=access,
                           limit=LINKS_SHOWN)
    outgoing = [{"row": row, "url": document_url(row.other.collection.name, row.other.path) if row.other else ""}
                for row in links.links]
    backlinks = [{"row": row, "url": document_url(row.other.collection.name, row.other.path, line=row.line)}
                 for row in links.backlinks]
    return {"outgoing": outgoing, "backlinks": backlinks, "links_total": links.links_total,
            "backlinks_total": links.backlinks_total}


def _display_value(value) -> str:
    if isinstance(value, list):
        return ", ".join(_display_value(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}: {_display_value(v)}" for k, v in value.items())
    return "" if value is None else str(value)


@login_required
@require_GET
def document_page(request, collection: str, path: str):
    document = _resolve(request, collection, path)
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
        "tags": [TagLink(name=t, url=tag_search_url(t)) for t in (document.tags or [])],
        "related_url": reverse("search:related", args=[document.collection.name, document.path]),
    }
    context.update(_link_items(document, access_of(request)))
    if view == "source":
        context["numbered_lines"] = list(enumerate(lines, start=1))
    else:
        context["html"], context["frontmatter_lines"] = render_markdown(body)
    return page(request, "search/document.html", context)


@login_required
@require_GET
def document_related(request, collection: str, path: str):
    """The notes related to this one, with why (the document page loads it into its Related panel;
    without JavaScript its link opens it as a page). No vectors: the link and tag neighbours, and a
    note saying so."""
    access = access_of(request)
    related = related_notes(f"pmd://{collection}/{path}", access=access, limit=RELATED_SHOWN)
    document = related.document
    items = [{"note": note, "url": document_url(note.document.collection.name, note.document.path),
              "elsewhere": note.document.collection_id != document.collection_id}
             for note in related.results]
    context = {"document": document, "related": related, "related_items": items,
               "document_url": document_url(document.collection.name, document.path)}
    if wants_fragment(request, "related-notes"):
        return page(request, "search/_related.html", context)
    return page(request, "search/related.html", context)


@login_required
@require_GET
def document_raw(request, collection: str, path: str):
    document = _resolve(request, collection, path)
    response = HttpResponse(document.content.body, content_type="text/plain; charset=utf-8")
    response.headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@login_required
@require_GET
def docid_redirect(request, docid: str):
    document = document_resolve(f"#{docid}", access=access_of(request)).document
    return redirect(document_url(document.collection.name, document.path))
