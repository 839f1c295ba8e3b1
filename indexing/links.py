"""Reads of the links between notes: a note's outgoing links and its backlinks, for every face
(`pmd links`/`pmd backlinks`, /api/links, the MCP tool pmd_links, the document view).

The note is found as `document_resolve` finds it, among the collections `access` sees; every note
shown on the other end of a link is in a collection `access` sees too (links resolve within one
collection, so nothing else can appear, but the filter is in the query all the same).
indexing.services.links writes and resolves them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from indexing.access import Access
from indexing.models import Document, DocumentLink
from indexing.selectors import _visible_documents, document_resolve
from indexing.services.links import link_written
from indexing.snippets import sentence_reading


@dataclass
class LinkRow:
    """One link, seen from the note asked about: `other` is the note at the far end (None when unresolved)."""

    kind: str
    written: str  # the link as written: [[Note#Heading]], ![[Embed]], (path.md)
    target_text: str
    heading: str
    shown: str
    line: int  # line of the link in the note that writes it
    context: str  # the sentence around it, as written
    other: Document | None = None

    @property
    def text(self) -> str:
        """The sentence around it as read: its words without markup, as every face shows it."""
        return sentence_reading(self.context)

    def as_dict(self) -> dict:
        doc = self.other
        return {
            "kind": self.kind,
            "link": self.written,
            "target": self.target_text,
            "heading": self.heading,
            "shown": self.shown,
            "line": self.line,
            "context": self.context,
            "text": self.text,
            "resolved": doc is not None,
            "docid": doc.docid if doc else None,
            "uri": doc.uri if doc else None,
            "title": doc.title if doc else None,
            "path": doc.path if doc else None,
        }


@dataclass
class DocumentLinks:
    document: Document
    links: list[LinkRow] = field(default_factory=list)  # written in the note, in order
    backlinks: list[LinkRow] = field(default_factory=list)  # written in other notes, linking to it
    links_total: int = 0
    backlinks_total: int = 0

    @property
    def unresolved(self) -> int:
        return sum(1 for link in self.links if link.other is None)

    def as_dict(self) -> dict:
        """The JSON shape shared by `pmd links/backlinks --json`, /api/links and the MCP tool."""
        doc = self.document
        return {
            "docid": doc.docid,
            "uri": doc.uri,
            "collection": doc.collection.name,
            "path": doc.path,
            "title": doc.title,
            "links": [link.as_dict() for link in self.links],
            "backlinks": [link.as_dict() for link in self.backlinks],
            "links_total": self.links_total,
            "backlinks_total": self.backlinks_total,
        }


def _row(link: DocumentLink, other: Document | None) -> LinkRow:
    return LinkRow(
        kind=link.kind,
        written=link_written(link.kind, link.target_text, link.heading),
        target_text=link.target_text,
        heading=link.heading,
        shown=link.shown_text,
        line=link.line,
        context=link.context,
        other=other,
    )


def document_links(
    reference: str, *, access: Access, collections: list[str] | None = None, limit: int | None = None
) -> DocumentLinks:
    """The links a note writes and the backlinks other notes write to it (at most `limit` of each;
    the totals count them all). Raises DocumentNotFound as `pmd get` does."""
    doc = document_resolve(reference, access=access, collections=collections or None).document
    visible = _visible_documents(access).filter(active=True)
    result = DocumentLinks(document=doc)

    outgoing = (
        DocumentLink.objects.filter(source=doc)
        .select_related("target__collection")
        .defer("target__frontmatter", "target__tags")
        .order_by("line", "id")
    )
    result.links_total = outgoing.count()
    rows = list(outgoing[:limit] if limit else outgoing)
    shown_ids = set(visible.filter(pk__in={r.target_id for r in rows if r.target_id}).values_list("pk", flat=True))
    result.links = [_row(r, r.target if r.target_id in shown_ids else None) for r in rows]

    incoming = (
        DocumentLink.objects.filter(target=doc, source__in=visible)
        .select_related("source__collection")
        .defer("source__frontmatter", "source__tags")
        .order_by("source__path", "line", "id")
    )
    result.backlinks_total = incoming.count()
    result.backlinks = [_row(r, r.source) for r in (incoming[:limit] if limit else incoming)]
    return result


EMBED_SHOWN_CHARS = 4000  # of a section shown inline where a note embeds it


def embed_shown(document: Document, heading: str = "") -> str:
    """The markdown an embed `![[Note#Heading]]` shows in place: the section under the heading (the
    block `^id`, or the whole note), of a note its reader sees (`document` comes from document_links'
    rows), cut at a line after EMBED_SHOWN_CHARS characters with a "…" line."""
    from indexing.keyword.keyword_index import embedded_text  # noqa: PLC0415 - only the document view needs it

    text = embedded_text(document.content.body, heading).strip("\n")
    if len(text) <= EMBED_SHOWN_CHARS:
        return text
    cut = text.rfind("\n", 0, EMBED_SHOWN_CHARS)
    return text[: cut if cut > 0 else EMBED_SHOWN_CHARS] + "\n\n…"
