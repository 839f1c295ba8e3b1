"""Reads: several documents at once (`pmd multi-get`, the API's and MCP's), within byte limits
every face shares."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from indexing import errors
from indexing.access import Access
from indexing.models import Content, Document
from indexing.paths import glob_match, glob_regex
from indexing.replicas import replica_reads
from indexing.selectors.documents import _active_documents, document_resolve

DEFAULT_MULTI_GET_MAX_BYTES = 10 * 1024  # per document, unless the caller asks for another bound


@dataclass
class MultiGetItem:
    document: Document
    lines: list[str]
    first_line: int
    skipped_reason: str | None = None
    truncated: bool = False


@dataclass
class MultiGetResult:
    items: list[MultiGetItem] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    omitted: int = 0  # matched, but not even listed: the response limit was used up
    total_bytes: int = 0
    max_bytes: int = 0
    max_total_bytes: int = 0

    @property
    def notice(self) -> str | None:
        """One line saying what the limits left out, for every output format."""
        skipped = sum(1 for i in self.items if i.skipped_reason)
        if not skipped and not self.omitted:
            return None
        parts = [f"{skipped} document(s) skipped (see each one's reason)"] if skipped else []
        if self.omitted:
            parts.append(
                f"{self.omitted} more matching document(s) not listed: total response limit reached "
                f"({self.max_total_bytes:,} bytes)"
            )
        return "; ".join(parts) + ": narrow the pattern, or read one with get"

    def as_dict(self) -> dict:
        """The JSON shape shared by `pmd multi-get --json`, /api/multi-get and the MCP tool."""
        return {
            "documents": [
                {
                    "docid": i.document.docid,
                    "uri": i.document.uri,
                    "title": i.document.title,
                    "skipped": i.skipped_reason,
                    "truncated": i.truncated,
                    "text": None if i.skipped_reason else "\n".join(i.lines),
                }
                for i in self.items
            ],
            "missing": self.missing,
            "omitted": self.omitted,
            "total_bytes": self.total_bytes,
            "max_bytes": self.max_bytes,
            "max_total_bytes": self.max_total_bytes,
            "notice": self.notice,
        }


MULTI_GET_MAX_REFERENCES = 200  # a comma list longer than this is refused: each reference is a lookup


def multi_get_limits(max_bytes: int | None, max_total_bytes: int | None = None) -> tuple[int, int]:
    """(per-document, whole-response) byte limits; a per-document limit above the total is refused."""
    total = max_total_bytes if max_total_bytes is not None else settings.PMD_MULTI_GET_MAX_TOTAL_BYTES
    if max_bytes is None:
        return min(DEFAULT_MULTI_GET_MAX_BYTES, total), total
    if max_bytes < 1:
        raise errors.MultiGetRefused(f"max_bytes must be a positive number of bytes, got {max_bytes}")
    if max_bytes > total:
        raise errors.MultiGetRefused(
            f"max_bytes={max_bytes:,} is above the total response limit of {total:,} bytes "
            "(PMD_MULTI_GET_MAX_TOTAL_BYTES); read a larger document with get"
        )
    return max_bytes, total


def _entry_bytes(doc: Document, reason: str | None = None) -> int:
    """What listing a document costs even without its text: uri, title, docid and skip reason."""
    return len(f"{doc.uri}{doc.title}{doc.docid}{reason or ''}".encode("utf-8", "surrogatepass"))


class _Bodies:
    """Document bodies fetched in batches of about `batch_bytes`, ahead of the order they are read.

    A glob over the whole index must not load every body: only documents under the
    per-document limit are fetched, a batch at a time, and reading stops with the budget.
    """

    def __init__(self, docs: list[Document], batch_bytes: int):
        self.order: dict[str, int] = {}
        for n, doc in enumerate(docs):
            self.order.setdefault(doc.content_id, n)
        self.docs = docs
        self.batch_bytes = batch_bytes
        self.cache: dict[str, str] = {}

    def body(self, doc: Document) -> str:
        if "body" not in doc.content.get_deferred_fields():
            return doc.content.body  # a reference resolved one by one came with its body
        if doc.content_id not in self.cache:
            self.cache.clear()
            wanted, size = [], 0
            for other in self.docs[self.order[doc.content_id] :]:
                if wanted and size + other.content.size > self.batch_bytes:
                    break
                wanted.append(other.content_id)
                size += other.content.size
            self.cache = dict(Content.objects.filter(pk__in=wanted).values_list("pk", "body"))
        return self.cache[doc.content_id]


@replica_reads
def documents_multi_get(
    spec: str,
    *,
    max_bytes: int | None = None,
    max_lines: int | None = None,
    collections: list[str] | None = None,
    max_total_bytes: int | None = None,
    access: Access,
) -> MultiGetResult:
    """`pmd multi-get`: a glob over `collection/path`, or a comma list of references/docids.

    The response is bounded on every face: documents over `max_bytes` are listed as skipped,
    and the whole answer (texts plus the entries of what was left out) stays within
    `max_total_bytes` (PMD_MULTI_GET_MAX_TOTAL_BYTES); beyond it documents are only counted.
    """
    max_bytes, max_total_bytes = multi_get_limits(max_bytes, max_total_bytes)
    result = MultiGetResult(max_bytes=max_bytes, max_total_bytes=max_total_bytes)
    docs: list[Document] = []
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    is_glob = len(parts) == 1 and any(ch in parts[0] for ch in "*?[{")
    if is_glob:
        pattern = parts[0][len("pmd://") :] if parts[0].startswith("pmd://") else parts[0]
        glob_regex(pattern)  # an invalid glob is an error even where nothing is indexed
        rows = _active_documents(access, collections).defer("content__body").order_by("collection__name", "path")
        for doc in rows.iterator(chunk_size=2000):
            if glob_match(pattern, f"{doc.collection.name}/{doc.path}") or glob_match(pattern, doc.path):
                docs.append(doc)
        if not docs:
            result.missing.append(parts[0])
    else:
        parts = list(dict.fromkeys(parts))  # the same reference twice is one document
        if len(parts) > MULTI_GET_MAX_REFERENCES:
            raise errors.MultiGetRefused(
                f"{len(parts):,} references: multi-get takes at most "
                f"{MULTI_GET_MAX_REFERENCES} (use a glob pattern for more)"
            )
        found: list[int] = []
        for part in parts:
            try:
                doc = document_resolve(part, access=access, collections=collections).document
            except (errors.DocumentNotFound, errors.CollectionNotFound):
                result.missing.append(part)
                continue
            if doc.pk not in found:  # a docid and a path can name the same document
                found.append(doc.pk)
        # Bodies are fetched below in batches within the byte budget, never all at once.
        by_pk = _active_documents(access).defer("content__body").in_bulk(found)
        docs = [by_pk[pk] for pk in found if pk in by_pk]
    bodies = _Bodies([d for d in docs if d.content.size <= max_bytes], batch_bytes=max_total_bytes)
    used = 0

    def skip(doc: Document, reason: str) -> None:
        nonlocal used
        cost = _entry_bytes(doc, reason)
        if used + cost > max_total_bytes:
            result.omitted += 1
            return
        used += cost
        result.items.append(MultiGetItem(doc, [], 1, skipped_reason=reason))

    for doc in docs:
        size = doc.content.size
        if size > max_bytes:
            skip(doc, f"over max_bytes ({size:,} bytes > {max_bytes:,})")
            continue
        if used + _entry_bytes(doc) > max_total_bytes:
            result.omitted += 1
            continue
        text_bytes, lines, truncated = size, None, False
        if max_lines is not None or used + _entry_bytes(doc) + size <= max_total_bytes:
            lines = bodies.body(doc).splitlines()
            truncated = max_lines is not None and len(lines) > max_lines
            if truncated:
                lines = lines[:max_lines]
                text_bytes = len("\n".join(lines).encode("utf-8", "surrogatepass"))
        cost = _entry_bytes(doc) + text_bytes
        if lines is None or used + cost > max_total_bytes:
            skip(doc, f"total response limit reached ({max_total_bytes:,} bytes)")
            continue
        used += cost
        result.items.append(MultiGetItem(doc, lines, 1, truncated=truncated))
    result.total_bytes = used
    return result
