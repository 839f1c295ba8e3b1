"""Related notes: for one note, the notes nearest to it in meaning merged with its link and tag
neighbours, each with the reasons it is shown. Every face reads `related_notes` (`pmd related`,
/api/related, the MCP tool pmd_related, the document view's Related panel).

Meaning: the mean of the note's chunk vectors (configured fingerprint) is searched through the
HNSW index as vector search does (search.retrieval.vector.nearest_chunks: active documents of
the collections `access` sees); each other note is represented by its best chunk, and its
similarity is that chunk's cosine similarity to the mean.

Score (higher first): similarity (0..1, 0 when not among the nearest) + LINK_BONUS for each
link direction (the note links to it, it links to the note) + TAG_BONUS per shared tag, at most
MAX_TAG_BONUS. Ties: by title, then uri.

Identical copies (other documents with the same content, in any collection) are never suggested:
they are the same text, not a related note; `copies` counts those `access` sees.

No vectors for the note (nothing embedded, the note not embedded yet, another model configured)
or the nearest-chunk query failing: the link and tag neighbours only, with a warning, never an
error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from django.db import DatabaseError

from indexing.access import Access
from indexing.errors import InvalidSearchInput
from indexing.models import Chunk, Document, DocumentLink
from indexing.selectors import _visible_documents, document_resolve
from indexing.services.embedding import embedding_config, fingerprint_configured
from search.retrieval.vector import nearest_chunks

LINK_BONUS = 0.5  # per direction: the note links to it / it links to the note
TAG_BONUS = 0.1  # per shared tag
MAX_TAG_BONUS = 0.3
MAX_TAG_CANDIDATES = 500  # notes sharing a tag kept for one note (the most shared tags win)
MAX_TAGS_CONSIDERED = 20  # of the note's tags that other notes carry: a note of 10,000 tags took minutes
MAX_TAG_LOOKUPS = 60  # of the note's tags looked up (in order) to find those
NOTES_PER_TAG = 200  # notes read for each of those tags
MAX_LINK_CANDIDATES = 500  # notes read for each link direction


@dataclass
class RelatedNote:
    """One related note. `links_to_it`: this note links to the note asked about (a backlink);
    `linked_from_it`: the note asked about links to this one."""

    document: Document
    score: float = 0.0
    similarity: float | None = None
    links_to_it: bool = False
    linked_from_it: bool = False
    shared_tags: list[str] = field(default_factory=list)

    @property
    def reasons(self) -> list[str]:
        out = []
        if self.links_to_it:
            out.append("links to it")
        if self.linked_from_it:
            out.append("linked from it")
        if self.shared_tags:
            out.append("shares tags: " + ", ".join(self.shared_tags))
        if self.similarity is not None:
            out.append(f"similar text ({self.similarity:.2f})")
        return out

    def as_dict(self) -> dict:
        doc = self.document
        return {
            "docid": doc.docid,
            "uri": doc.uri,
            "collection": doc.collection.name,
            "path": doc.path,
            "title": doc.title,
            "score": round(self.score, 4),
            "similarity": None if self.similarity is None else round(self.similarity, 4),
            "reasons": self.reasons,
            "links_to_it": self.links_to_it,
            "linked_from_it": self.linked_from_it,
            "shared_tags": list(self.shared_tags),
        }


@dataclass
class RelatedNotes:
    document: Document
    results: list[RelatedNote] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    copies: int = 0  # other documents with the same content (never among the results)

    def as_dict(self) -> dict:
        """The JSON shape shared by `pmd related --json`, /api/related and the MCP tool."""
        doc = self.document
        return {
            "docid": doc.docid,
            "uri": doc.uri,
            "collection": doc.collection.name,
            "path": doc.path,
            "title": doc.title,
            "results": [r.as_dict() for r in self.results],
            "warnings": list(self.warnings),
            "copies": self.copies,
        }


def related_notes(
    reference: str, *, access: Access, limit: int = 10, collections: list[str] | None = None
) -> RelatedNotes:
    """The notes related to the note `reference` names (found as `pmd get` finds it; raises
    DocumentNotFound likewise), best first, at most `limit`."""
    doc = document_resolve(reference, access=access, collections=collections or None).document
    limit = max(1, int(limit))
    visible = _visible_documents(access).filter(active=True).exclude(content_id=doc.content_id)
    result = RelatedNotes(
        document=doc,
        copies=_visible_documents(access).filter(active=True, content_id=doc.content_id).exclude(pk=doc.pk).count(),
    )
    found: dict[int, RelatedNote] = {}

    def entry(other: Document) -> RelatedNote:
        if other.pk not in found:
            found[other.pk] = RelatedNote(document=other)
        return found[other.pk]

    # Bounded work whatever the note: the tag arrays are never read back (a note may carry
    # thousands), links and tags are read up to their caps.
    docs = visible.select_related("collection").defer("frontmatter", "tags", "tags_with_parents")
    for other in docs.filter(pk__in=DocumentLink.objects.filter(target=doc).values("source_id"))[:MAX_LINK_CANDIDATES]:
        entry(other).links_to_it = True
    for other in docs.filter(pk__in=DocumentLink.objects.filter(source=doc, target__isnull=False).values("target_id"))[
        :MAX_LINK_CANDIDATES
    ]:
        entry(other).linked_from_it = True
    shared = _sharing_tags(visible, list(dict.fromkeys(doc.tags or [])))
    if shared:
        for other in docs.filter(pk__in=list(shared)):
            entry(other).shared_tags = shared[other.pk]

    similar, warning = _nearest(doc, access, want=limit * 3)
    if warning:
        result.warnings.append(warning)
    if similar:
        for other in docs.filter(pk__in=list(similar)):
            entry(other).similarity = similar[other.pk]

    for note in found.values():
        note.score = (
            (note.similarity or 0.0)
            + LINK_BONUS * (note.links_to_it + note.linked_from_it)
            + min(MAX_TAG_BONUS, TAG_BONUS * len(note.shared_tags))
        )
    ranked = sorted(found.values(), key=lambda n: (-n.score, n.document.title.lower(), n.document.uri))
    result.results = ranked[:limit]
    return result


def _sharing_tags(visible, tags: list[str]) -> dict[int, list[str]]:
    """{document id: the note's tags it carries} for up to MAX_TAG_CANDIDATES notes, those sharing
    the most first. Bounded work: at most MAX_TAG_LOOKUPS indexed lookups of NOTES_PER_TAG notes,
    ending once MAX_TAGS_CONSIDERED tags were found on other notes."""
    shared: dict[int, list[str]] = {}
    found = 0
    for tag in tags[:MAX_TAG_LOOKUPS]:
        notes = list(visible.filter(tags__contains=[tag]).order_by().values_list("pk", flat=True)[:NOTES_PER_TAG])
        for pk in notes:
            shared.setdefault(pk, []).append(tag)
        found += bool(notes)
        if found >= MAX_TAGS_CONSIDERED:
            break
    best = sorted(shared.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:MAX_TAG_CANDIDATES]
    return dict(best)


def _nearest(doc: Document, access: Access, *, want: int) -> tuple[dict[int, float], str | None]:
    """{document id: similarity} of the notes nearest the mean of `doc`'s chunk vectors (not
    `doc`, not its copies), or a warning saying why there are none."""
    fingerprint = fingerprint_configured(embedding_config())
    if fingerprint is None:
        return {}, "nothing is embedded with the configured model: showing links and tags only (run `pmd embed`)"
    vectors = [
        list(v)
        for v in Chunk.objects.filter(fingerprint=fingerprint, content_id=doc.content_id).values_list(
            "embedding", flat=True
        )
    ]
    if not vectors:
        return {}, "this note has no embeddings yet: showing links and tags only (run `pmd embed`)"
    mean = [sum(column) / len(vectors) for column in zip(*vectors)]
    norm = math.sqrt(sum(x * x for x in mean))
    if norm == 0:
        return {}, "this note's vectors cancel out: showing links and tags only"
    mean = [x / norm for x in mean]
    own_chunks = len(vectors)
    try:
        rows = nearest_chunks(
            fingerprint, mean, k=min(10_000, own_chunks + max(40, want * 4)), collection_ids=access.collection_ids()
        )
    except (InvalidSearchInput, DatabaseError) as exc:
        return {}, f"vector search is unavailable ({exc}): showing links and tags only"
    best: dict[int, float] = {}
    for row in rows:
        content_hash, distance, doc_id = row[0], float(row[5]), row[6]
        if content_hash == doc.content_id or doc_id in best:
            continue
        best[doc_id] = max(0.0, 1.0 - distance)
        if len(best) >= want:
            break
    return best, None
