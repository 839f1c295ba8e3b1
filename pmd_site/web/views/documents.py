"""A document's page (rendered or source, with its contexts), its raw text, its related notes, and
/d/<docid> links.

A reference to nothing indexed is the selectors' DocumentNotFound: a 404 page (pmd_site.web.errors).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.http import content_disposition_header
from django.views.decorators.http import require_GET

from indexing.attachments import attachment_find, attachment_read, original_read
from indexing.convert import is_converted
from indexing.links import document_links, embed_shown
from indexing.markdown import LinkTargets
from indexing.selectors import contexts_for, document_resolve
from indexing.services.search_log import search_log_opened
from pmd_site.web.pages import access_of, page, wants_fragment
from pmd_site.web.rendering import note_part, render_markdown, unit_markers
from pmd_site.web.views.search import TagLink, document_url, tag_search_url
from search import related_notes

LINKS_SHOWN = 200  # of each kind; the totals say when there are more
RELATED_SHOWN = 10
EMBEDS_SHOWN = 20  # embeds of other notes shown in place on one page; the rest are links
TAGS_SHOWN = 100  # of a note's tags; the page says how many more
FRONTMATTER_SHOWN = 50  # keys, each value shown up to VALUE_CHARS characters
VALUE_CHARS = 500


def _resolve(request, collection: str, path: str):
    return document_resolve(f"pmd://{collection}/{path}", access=access_of(request)).document


def _link_items(document, access) -> dict:
    """The note's outgoing links (resolved ones to the target's page) and backlinks (to the linking
    line of the source note), among the notes `access` sees."""
    links = document_links(f"pmd://{document.collection.name}/{document.path}", access=access, limit=LINKS_SHOWN)
    outgoing = [
        {"row": row, "url": document_url(row.other.collection.name, row.other.path) if row.other else ""}
        for row in links.links
    ]
    backlinks = [
        {"row": row, "url": document_url(row.other.collection.name, row.other.path, line=row.line)}
        for row in links.backlinks
    ]
    return {
        "outgoing": outgoing,
        "backlinks": backlinks,
        "links_total": links.links_total,
        "backlinks_total": links.backlinks_total,
    }


def _link_targets(document, outgoing: list[dict]) -> LinkTargets:
    """Where the rendered note's wikilinks and embeds lead: a note to its page as the links table
    resolved it, an image to /file/ when the collection holds it (looked up once per name)."""
    notes: dict[str, str | None] = {}
    # the note itself, by its name: what it embeds may link back to it
    notes[document.path.rsplit("/", 1)[-1].removesuffix(".md").lower()] = document_url(
        document.collection.name, document.path
    )
    for item in outgoing:
        notes.setdefault(item["row"].target_text.strip().lower(), item["url"] or None)
    images: dict[str, str | None] = {}

    def image_url(name: str) -> str | None:
        if name not in images:
            found = attachment_find(document.collection, name, near=document.path)
            images[name] = reverse("search:file", args=[document.collection.name, found]) if found else None
        return images[name]

    documents = {}
    for item in outgoing:
        if item["row"].other is not None:
            documents.setdefault(item["row"].target_text.strip().lower(), item["row"].other)
    shown: list[int] = []

    def embed_text(target: str, heading: str) -> str | None:
        found = documents.get(target.strip().lower())
        if found is None or len(shown) >= EMBEDS_SHOWN:
            return None
        shown.append(found.pk)
        return embed_shown(found, heading)

    return LinkTargets(
        note_url=lambda target: notes.get(target.strip().lower()), image_url=image_url, embed_text=embed_text
    )


def _display_value(value, budget: int = VALUE_CHARS) -> str:
    """A frontmatter value as one line of text, at most `budget` characters (then "…"): a list of
    10,000 tags is not a page."""
    parts: list[str] = []
    used = 0

    def add(text: str) -> bool:
        nonlocal used
        parts.append(text)
        used += len(text)
        return used <= budget

    def walk(item) -> bool:
        if isinstance(item, (list, dict)):
            pairs = item.items() if isinstance(item, dict) else ((None, v) for v in item)
            for i, (key, v) in enumerate(pairs):
                if (i and not add(", ")) or (key is not None and not add(f"{key}: ")) or not walk(v):
                    return False
            return True
        return add("" if item is None else str(item))

    whole = walk(value)
    text = "".join(parts)
    return text if whole and len(text) <= budget else text[:budget] + "…"


def _part_number(request) -> int | None:
    try:
        return int(request.GET["part"])
    except (KeyError, ValueError):
        return None


@login_required
@require_GET
def document_page(request, collection: str, path: str):
    document = _resolve(request, collection, path)
    if request.GET.get("sid", "").isdigit():  # opened from a search's results: the search log notes it
        search_log_opened(
            access=access_of(request),
            entry_id=int(request.GET["sid"]),
            uri=f"pmd://{document.collection.name}/{document.path}",
        )
    body = document.content.body
    view = "source" if request.GET.get("view") == "source" else "rendered"
    try:
        line = int(request.GET.get("line", "0"))
    except ValueError:
        line = 0
    part = note_part(body, number=_part_number(request), line=line)
    tags = list(dict.fromkeys(document.tags or []))
    frontmatter = sorted(document.frontmatter.items()) if isinstance(document.frontmatter, dict) else []
    context = {
        "document": document,
        "collection": document.collection,
        "contexts": contexts_for(document.collection, document.path),
        "frontmatter": [(k, _display_value(v)) for k, v in frontmatter[:FRONTMATTER_SHOWN]],
        "frontmatter_more": max(0, len(frontmatter) - FRONTMATTER_SHOWN),
        "view": view,
        "line": line if 0 < line <= max(1, part.total_lines) else 0,
        "query": request.GET.get("q", "")[:1000],
        "line_count": part.total_lines,
        "part": part,
        "raw_url": reverse("search:raw", args=[document.collection.name, document.path]),
        "tags": [TagLink(name=t, url=tag_search_url(t)) for t in tags[:TAGS_SHOWN]],
        "tags_more": max(0, len(tags) - TAGS_SHOWN),
        "related_url": reverse("search:related", args=[document.collection.name, document.path]),
        "file_type": document.file_type,
        "original_url": (
            reverse("search:original", args=[document.collection.name, document.path])
            if is_converted(document.path)
            else ""
        ),
    }
    context.update(_link_items(document, access_of(request)))
    if view == "source":
        lines = (
            part.text.splitlines() if part.whole else part.text.split("\n")[: part.last_line - part.first_line + 1]
        )  # blank lines count
        context["numbered_lines"] = list(enumerate(lines, start=part.first_line))
    else:
        context["html"], context["frontmatter_lines"] = render_markdown(
            part.text,
            offset=None if part.number == 1 else part.first_line - 1,
            links=_link_targets(document, context["outgoing"]),
        )
        if is_converted(document.path):
            context["html"] = unit_markers(context["html"])
        context["frontmatter_lines"] = part.frontmatter_lines
    return page(request, "web/document.html", context)


@login_required
@require_GET
def document_related(request, collection: str, path: str):
    """The notes related to this one, with why (the document page loads it into its Related panel;
    without JavaScript its link opens it as a page). No vectors: the link and tag neighbours, and a
    note saying so."""
    access = access_of(request)
    related = related_notes(f"pmd://{collection}/{path}", access=access, limit=RELATED_SHOWN)
    document = related.document
    items = [
        {
            "note": note,
            "url": document_url(note.document.collection.name, note.document.path),
            "elsewhere": note.document.collection_id != document.collection_id,
        }
        for note in related.results
    ]
    context = {
        "document": document,
        "related": related,
        "related_items": items,
        "document_url": document_url(document.collection.name, document.path),
    }
    if wants_fragment(request, "related-notes"):
        return page(request, "web/_related.html", context)
    return page(request, "web/related.html", context)


@login_required
@require_GET
def document_raw(request, collection: str, path: str):
    document = _resolve(request, collection, path)
    response = HttpResponse(document.content.body, content_type="text/plain; charset=utf-8")
    response.headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@login_required
@require_GET
def document_file(request, collection: str, path: str):
    """An image of a collection the user sees, for a note's embeds (never a script: sandboxed)."""
    found = attachment_read(collection, path, access=access_of(request))
    response = HttpResponse(found.data, content_type=found.content_type)
    response.headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'; sandbox"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "private, max-age=300"
    return response


@login_required
@require_GET
def document_original(request, collection: str, path: str):
    """The original file of a document (a PDF, a deck…), downloaded, never shown inline."""
    found = original_read(collection, path, access=access_of(request))
    response = HttpResponse(found.data, content_type=found.content_type)
    response.headers["Content-Disposition"] = content_disposition_header(True, found.filename)
    response.headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Cache-Control"] = "private, no-store"
    return response


@login_required
@require_GET
def docid_redirect(request, docid: str):
    document = document_resolve(f"#{docid}", access=access_of(request)).document
    return redirect(document_url(document.collection.name, document.path))
