"""Reads: finding documents the way users name them, and reading their lines.

Document bodies always come from the database, never from the file system, so no
reference (`../`, absolute paths, symlinks) can read a file outside the index.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path

from django.db.models import Q

from indexing import errors
from indexing.access import Access, collection_suggestions, visible_collections
from indexing.convert import unit_lines
from indexing.models import Document
from indexing.paths import absolute_path, parse_reference, virtual_path
from indexing.replicas import replica_reads
from indexing.selectors.collections import contexts_for


def close_matches(word: str, candidates: list[str], n: int = 5) -> list[str]:
    return difflib.get_close_matches(word, candidates, n=n, cutoff=0.5)


def _visible_documents(access: Access):
    """Documents (active or not) of the collections `access` sees: every document read starts here."""
    ids = access.collection_ids()
    return Document.objects.all() if ids is None else Document.objects.filter(collection_id__in=ids)


def _active_documents(access: Access, collections: list[str] | None = None):
    qs = _visible_documents(access).filter(active=True).select_related("collection", "content")
    if collections:
        qs = qs.filter(collection__name__in=collections)
    return qs


def _suggest(path: str, collections: list[str] | None, access: Access) -> list[str]:
    rows = _visible_documents(access).filter(active=True)
    if collections:
        rows = rows.filter(collection__name__in=collections)
    basename = path.rsplit("/", 1)[-1]
    stem = basename.rsplit(".", 1)[0]
    candidates = (
        list(
            rows.filter(Q(path__icontains=stem[:40]) | Q(title__icontains=stem[:40])).values_list(
                "collection__name", "path"
            )[:200]
        )
        if stem
        else []
    )
    if len(candidates) < 5:
        candidates += list(rows.values_list("collection__name", "path")[:5000])
    full = {virtual_path(c, p): p for c, p in candidates}
    by_path = close_matches(path, list(full.values()), n=5)
    out = [uri for uri, p in full.items() if p in by_path]
    if len(out) < 5:
        names = {p.rsplit("/", 1)[-1]: uri for uri, p in full.items()}
        out += [names[n] for n in close_matches(basename, list(names), n=5) if names[n] not in out]
    return out[:5]


def _filesystem_reference(text: str, access: Access) -> tuple[str, str] | None:
    """An absolute or ./relative path that lies inside a visible collection's folder → (collection, rel)."""
    candidate = Path(text).expanduser()
    if not (candidate.is_absolute() or text.startswith(("./", "../", "~"))):
        return None
    resolved = Path(absolute_path(candidate))
    for name, root in visible_collections(access).values_list("name", "root_path"):
        root_path = Path(root)
        if root_path in resolved.parents:
            return name, resolved.relative_to(root_path).as_posix()
    return None


@dataclass
class ResolvedDocument:
    document: Document
    line: int | None = None
    unit: tuple[str, str] | None = None  # ("page", "12") of a converted file


def document_resolve(reference: str, *, access: Access, collections: list[str] | None = None) -> ResolvedDocument:
    """Find one active document by `#docid`, `pmd://coll/path`, `coll/path`, `path` or a file path,
    among the collections `access` sees (a document elsewhere is "not found", like a missing one)."""
    fs = _filesystem_reference(reference.strip(), access)
    if fs is not None:
        reference = virtual_path(*fs)
    elif reference.strip().startswith(("/", "../", "~")):
        raise errors.DocumentNotFound(f"{reference} is not inside any indexed collection")
    try:
        ref = parse_reference(reference)
    except errors.InvalidPath as exc:
        raise errors.DocumentNotFound(str(exc)) from None
    docs = _active_documents(access, collections)
    if ref.docid:
        matches = list(docs.filter(docid=ref.docid)[:2])
        if not matches:
            raise errors.DocumentNotFound(f"no document with docid #{ref.docid}")
        return ResolvedDocument(matches[0], ref.line, ref.unit)
    if ref.collection:
        if not visible_collections(access).filter(name=ref.collection).exists():
            raise errors.CollectionNotFound(
                name=ref.collection, suggestions=collection_suggestions(ref.collection, access)
            )
        found = docs.filter(collection__name=ref.collection, path=ref.path).first()
        if found:
            return ResolvedDocument(found, ref.line, ref.unit)
        raise errors.DocumentNotFound(
            f"no document pmd://{ref.collection}/{ref.path}", _suggest(ref.path, [ref.collection], access)
        )
    # A bare path: exact path in any collection, then `collection/path`, then a unique suffix.
    found = docs.filter(path=ref.path).first()
    if found:
        return ResolvedDocument(found, ref.line, ref.unit)
    head, _, tail = ref.path.partition("/")
    if tail:
        found = docs.filter(collection__name=head, path=tail).first()
        if found:
            return ResolvedDocument(found, ref.line, ref.unit)
    suffix = list(docs.filter(path__endswith="/" + ref.path)[:2])
    if len(suffix) == 1:
        return ResolvedDocument(suffix[0], ref.line, ref.unit)
    if tail and (not collections or head in collections) and visible_collections(access).filter(name=head).exists():
        # `rustbook/ch99.md`: a note of that collection was meant; suggest its notes, not another's
        raise errors.DocumentNotFound(f"no document pmd://{head}/{tail}", _suggest(tail, [head], access))
    raise errors.DocumentNotFound(f"no document {ref.path}", _suggest(ref.path, collections, access))


def document_lines(
    document: Document, *, from_line: int | None = None, max_lines: int | None = None
) -> tuple[list[str], int]:
    """The document's lines in a window; returns (lines, first line number)."""
    lines = document.content.body.splitlines()
    start = max(1, from_line or 1)
    chosen = lines[start - 1 :]
    if max_lines is not None and max_lines >= 0:
        chosen = chosen[:max_lines]
    return chosen, start


@dataclass
class DocumentPage:
    """A document, or a window of its lines: what `get` returns in every face."""

    document: Document
    lines: list[str]
    first: int  # number of the first line in `lines`
    total_lines: int

    @property
    def last(self) -> int:
        """Number of the last line in `lines` (first - 1 when there are none)."""
        return self.first + len(self.lines) - 1

    def as_dict(self) -> dict:
        doc = self.document
        return {
            "docid": doc.docid,
            "uri": doc.uri,
            "collection": doc.collection.name,
            "path": doc.path,
            "title": doc.title,
            "from_line": self.first,
            "lines": self.lines,
            "context": contexts_for(doc.collection, doc.path),
            "frontmatter": doc.frontmatter,
        }


@replica_reads
def document_page(
    reference: str,
    *,
    access: Access,
    from_line: int | None = None,
    max_lines: int | None = None,
    collections: list[str] | None = None,
) -> DocumentPage:
    """Resolve a reference (its `:LINE` is the first line unless `from_line` is given) and cut its window."""
    resolved = document_resolve(reference, access=access, collections=collections or None)
    doc = resolved.document
    if resolved.unit is not None:  # `report.pdf:p12`: that page's lines, from its marker on
        unit, name = resolved.unit
        found = unit_lines(doc.content.body, unit, name)
        if found is None:
            raise errors.DocumentNotFound(f"{doc.uri} has no {unit} {name}")
        first, count = found
        lines, first = document_lines(
            doc, from_line=from_line or first, max_lines=count if max_lines is None else min(max_lines, count)
        )
        return DocumentPage(doc, lines, first, total_lines=len(doc.content.body.splitlines()))
    lines, first = document_lines(doc, from_line=from_line or resolved.line, max_lines=max_lines)
    total = len(doc.content.body.splitlines())
    if first > max(total, 1):
        raise errors.LinePastEnd(uri=doc.uri, line=first, lines=total)
    return DocumentPage(doc, lines, first, total_lines=total)


@replica_reads
def documents_list(
    target: str | None = None, *, access: Access, limit: int | None = None, offset: int = 0
) -> list[Document]:
    """`pmd ls` (and MCP's paged resources/list): documents of `collection[/prefix]` (or
    `pmd://collection/prefix`)."""
    qs = (
        _visible_documents(access)
        .filter(active=True)
        .select_related("collection")
        .order_by("collection__name", "path", "id")
    )
    if not target:
        return list(qs[offset : offset + limit] if limit else qs[offset:])
    text = target[len("pmd://") :] if target.startswith("pmd://") else target
    name, _, prefix = text.partition("/")
    if not visible_collections(access).filter(name=name).exists():
        raise errors.CollectionNotFound(name=name, suggestions=collection_suggestions(name, access))
    qs = qs.filter(collection__name=name)
    prefix = prefix.strip("/")
    if prefix:
        qs = qs.filter(Q(path=prefix) | Q(path__startswith=prefix + "/"))
    return list(qs[offset : offset + limit] if limit else qs[offset:])
