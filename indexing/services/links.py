"""Links between the notes of a collection: storing what a scan parsed, resolving their targets.

A link names a note the way its author thought of it; `links_resolve` finds the note, within the
same collection and among its active documents, the way Obsidian does, trying in order:

1. the path relative to the linking note's folder (`[[sub/Note]]`, `[x](../Note.md)`);
2. the path from the collection root;
3. the file name without extension, case-insensitive (`[[Note]]`, `[[folder/Note]]` as a path
   suffix); when several notes share it, the shortest path wins (then the first in order);
4. the frontmatter `title`;
5. the frontmatter `aliases` (a list or a string).

After a scan that changed the collection, the links that can have changed are resolved again
(`LinkScope`): those of the notes written, and, when notes came, went or changed a name (path,
title, aliases), the links to those notes, the unresolved ones, and those whose text holds one of
their names (a new note can take a link from another by a shorter path). So a renamed note loses
its backlinks by file name while those by title or alias follow it, a new note satisfies an old
broken link, and editing a note's body costs its own links only. A link that resolves to nothing
is a problem of the linking note (`LinkResolution.problems`).
"""

from __future__ import annotations

import bisect
import json
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import quote

from django.db import connection

from indexing.models import Collection, Document, DocumentLink
from indexing.structure import (
    LINKS_MAX,
    MARKDOWN,
    MARKDOWN_EXTENSIONS,
    Link,
    frontmatter_names,
    link_candidates,
)

MAX_LINKS_PER_NOTE = LINKS_MAX  # the scan keeps no more (and says so); this is a guard
FEW_TARGETS = 500  # link texts resolved among the notes they could name; more: among all notes
FEW_NAMED = 200  # notes whose names changed in one scan for which the links are resolved in part


def links_store(
    links_by_document: Iterable[tuple[int, list[Link]]],
    *,
    replace: Iterable[int] = (),
    names: NoteNames | None = None,
    paths: dict[int, str] | None = None,
    links=DocumentLink,
) -> int:
    """Write the links of documents (their ids and parsed links); the old links of `replace` go first.
    With `names` (and the documents' `paths`) each link gets the target they resolve it to, else
    none: `links_resolve` has the last word either way. Returns how many rows were written.

    One INSERT … SELECT FROM unnest(arrays) per few thousand links: a vault's first scan writes
    hundreds of thousands of them, which model instances and bulk_create would make slow."""
    replace = list(replace)
    if replace:
        links.objects.filter(source_id__in=replace).delete()
    columns: tuple[list, ...] = ([], [], [], [], [], [], [], [])
    written = 0

    def insert() -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {links._meta.db_table} "
                "(source_id, kind, target_text, heading, shown_text, line, context, target_id) "
                "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], %s::int[], "
                "%s::text[], %s::bigint[])",
                list(columns),
            )
        for column in columns:
            column.clear()

    for doc_id, found in links_by_document:
        source_path = paths.get(doc_id) if names is not None and paths else None
        for link in found[:MAX_LINKS_PER_NOTE]:
            target = names.resolve(source_path, link.target, link.kind) if source_path is not None else None
            for column, value in zip(
                columns,
                (
                    doc_id,
                    link.kind,
                    link.target[:1000],
                    link.heading[:500],
                    link.shown[:500],
                    link.line,
                    link.context,
                    target,
                ),
            ):
                column.append(value)
            written += 1
            if len(columns[0]) >= 5000:
                insert()
    if columns[0]:
        insert()
    return written


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _stem(name: str) -> str:
    lower = name.lower()
    for ext in MARKDOWN_EXTENSIONS:
        if lower.endswith(ext):
            return name[: -len(ext)]
    return name


class NoteNames:
    """The names the active notes of a collection can be linked by (built from rows, or one note at a time)."""

    def __init__(self, rows: Iterable[tuple[int, str, object, object, object]] = ()):
        self.by_path: dict[str, int] = {}
        self.by_path_lower: dict[str, int] = {}
        self.by_stem: dict[str, list[tuple[int, str, int]]] = {}  # (len(path), path, pk), shortest first
        self.by_title: dict[str, tuple[int, str, int]] = {}
        self.by_alias: dict[str, tuple[int, str, int]] = {}
        for row in rows:
            self.add(*row)

    def add(self, pk: int, path: str, title=None, alias_list=None, alias=None) -> None:
        """A note, with its frontmatter's title, aliases and alias (as stored: any JSON value, or None)."""
        self.by_path[path] = pk
        self.by_path_lower.setdefault(path.lower(), pk)
        entry = (len(path), path, pk)
        bisect.insort(self.by_stem.setdefault(_stem(posixpath.basename(path)).lower(), []), entry)
        fm = {k: v for k, v in (("title", title), ("aliases", alias_list), ("alias", alias)) if v is not None}
        if not fm:
            return
        name, names = frontmatter_names(fm)
        for table, keys in ((self.by_title, [name] if name else []), (self.by_alias, names)):
            for key in keys:
                key = key.lower()
                if key not in table or entry < table[key]:
                    table[key] = entry

    @classmethod
    def of(cls, collection_id: int, *, documents=Document) -> NoteNames:
        return cls(
            documents.objects.filter(collection_id=collection_id, active=True)
            .order_by()
            .values_list("id", "path", "frontmatter__title", "frontmatter__aliases", "frontmatter__alias")
            .iterator(chunk_size=5000)
        )

    @classmethod
    def for_targets(cls, collection_id: int, targets: Iterable[str]) -> NoteNames:
        """The names of only the notes these link texts could name (by path, file name, title or
        alias): resolving those links among them gives what the whole collection's names give, at
        the cost of a few rows, not the whole collection (an edit resolves its own links)."""
        patterns, fields = set(), set()
        for target in targets:
            name = target.strip().strip("/")
            if not name:
                continue
            if '"' in name or "\\" in name:
                return cls.of(collection_id)  # escaped in the frontmatter's JSON text: read them all
            stem = _stem(posixpath.basename(name)).lower()
            patterns.add(f"%{_like_escape(stem)}%")
            fields.update(f"%{_like_escape(key)}%" for key in (name.lower(), stem))
        if len(patterns) > FEW_TARGETS:
            return cls.of(collection_id)
        if not patterns:
            return cls()
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id, path, (frontmatter->'title')::text, (frontmatter->'aliases')::text,"
                f" (frontmatter->'alias')::text FROM {Document._meta.db_table}"
                " WHERE collection_id = %s AND active"
                " AND (lower(path) LIKE ANY(%s::text[]) OR lower(frontmatter::text) LIKE ANY(%s::text[]))",
                [collection_id, sorted(patterns), sorted(fields)],
            )
            rows = cursor.fetchall()
        return cls((pk, path, *(None if v is None else json.loads(v) for v in values)) for pk, path, *values in rows)

    def _path(self, path: str) -> int | None:
        return self.by_path.get(path) or self.by_path_lower.get(path.lower())

    def resolve(self, source_path: str, target: str, kind: str = "") -> int | None:
        """The id of the note `target` names, written in the note at `source_path`; None if none."""
        target = target.strip()
        if "/" not in target and not target.startswith("."):  # the usual [[Name]]: no path to normalise
            folder = source_path.rpartition("/")[0]
            md = "" if target.lower().endswith(MARKDOWN_EXTENSIONS) else ".md"
            for path in ((f"{folder}/{target}", f"{folder}/{target}{md}") if folder else ()) + (target, target + md):
                found = self._path(path)
                if found:
                    return found
        else:
            relative, root = link_candidates(source_path, target)
            for path in relative + root:
                found = self._path(path)
                if found:
                    return found
        name = target.strip("/")
        if not name:
            return None
        stem = _stem(posixpath.basename(name)).lower()
        candidates = self.by_stem.get(stem)
        if candidates:
            if "/" not in name:
                return candidates[0][2]
            # [[folder/Note]]: a note whose path ends with it (the shortest one)
            suffix = "/" + posixpath.normpath(_stem(name)).lower().lstrip("./") + ".md"
            for _, path, pk in candidates:
                if ("/" + _stem(path).lower() + ".md").endswith(suffix):
                    return pk
        if kind == MARKDOWN:
            name = _stem(posixpath.basename(name))  # [x](Title.md): a title or alias is a name, not a path
        key = name.lower()
        found = self.by_title.get(key) or self.by_alias.get(key)
        return found[2] if found else None


LINK_PROBLEM_PREFIX = "unresolved link "


@dataclass
class LinkResolution:
    changed: int = 0  # links whose target changed
    problems: list[tuple[str, str]] = field(default_factory=list)  # (linking note's path, message), in order


@dataclass
class LinkScope:
    """What a scan changed: `sources`, the notes whose links it wrote; `named`, the notes whose
    names came, went or changed (added, removed, back again, a new title or aliases)."""

    sources: set[int] = field(default_factory=set)
    named: set[int] = field(default_factory=set)


def links_resolve(
    collection: Collection, *, scope: LinkScope | None = None, names: NoteNames | None = None
) -> LinkResolution:
    """Resolve the links of the collection's active notes again (with `scope`, only those the
    change can have moved; `names`: the collection's current names when the caller holds them and
    no name changed); returns how many targets changed and the unresolved links as problems of
    their notes."""
    if scope is None or len(scope.named) > FEW_NAMED:  # a first scan, a big move: everything again
        return links_resolve_models(collection.pk)
    return _links_resolve_scoped(collection.pk, scope, names)


def _name_patterns(named: list[int]) -> list[str]:
    """LIKE patterns (lower case) matching a link text that may name one of these notes."""
    keys: set[str] = set()
    rows = Document.objects.filter(pk__in=named, active=True).values_list(
        "path", "frontmatter__title", "frontmatter__aliases", "frontmatter__alias"
    )
    for path, title, alias_list, alias in rows:
        keys.add(_stem(posixpath.basename(path)))
        fm = {k: v for k, v in (("title", title), ("aliases", alias_list), ("alias", alias)) if v is not None}
        name, aliases = frontmatter_names(fm)
        keys.update([name, *aliases] if name else aliases)
    patterns = set()
    for key in filter(None, (k.strip().lower() for k in keys)):
        for form in (key, quote(key, safe="/")):
            patterns.add(f"%{_like_escape(form)}%")
    return sorted(patterns)


def _links_resolve_scoped(collection_id: int, scope: LinkScope, names: NoteNames | None) -> LinkResolution:
    named = sorted(scope.named)
    gone = set(Document.objects.filter(pk__in=named, active=False).values_list("pk", flat=True)) if named else set()
    if gone:  # the links of notes that are gone point nowhere (they come back resolved with their note)
        DocumentLink.objects.filter(source_id__in=gone, target__isnull=False).update(target=None)
    sources = sorted((scope.sources | scope.named) - gone)
    where, params = ["l.source_id = ANY(%s::bigint[])"], [sources]
    if named:
        where += ["l.target_id = ANY(%s::bigint[])", "l.target_id IS NULL"]
        params.append(named)
        patterns = _name_patterns(named)
        if patterns:
            where.append("lower(l.target_text) LIKE ANY(%s::text[])")
            params.append(patterns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT l.id, d.path, l.kind, l.target_text, l.target_id FROM {DocumentLink._meta.db_table} l"
            f" JOIN {Document._meta.db_table} d ON d.id = l.source_id"
            " WHERE d.collection_id = %s AND d.active AND (" + " OR ".join(where) + ")",
            [collection_id, *params],
        )
        rows = cursor.fetchall()
    changes: list[tuple[int, int | None]] = []
    if rows:
        if names is None or named:
            names = NoteNames.for_targets(collection_id, {row[3] for row in rows})
        memo: dict[tuple[str, str, bool], int | None] = {}
        for pk, source_path, kind, target_text, current in rows:
            key = (source_path.rpartition("/")[0], target_text, kind == MARKDOWN)
            if key not in memo:
                memo[key] = names.resolve(source_path, target_text, kind)
            if memo[key] != current:
                changes.append((pk, memo[key]))
    _update_targets(changes, DocumentLink)
    return LinkResolution(changed=len(changes), problems=link_problems(collection_id))


def link_problems(collection_id: int) -> list[tuple[str, str]]:
    """The unresolved links of the collection's active notes, as (path, message), in order."""
    rows = (
        DocumentLink.objects.filter(source__collection_id=collection_id, source__active=True, target__isnull=True)
        .order_by("source__path", "line", "id")
        .values_list("source__path", "kind", "target_text", "heading", "line")
    )
    return [
        (path, f"{LINK_PROBLEM_PREFIX}{link_written(kind, text, heading)} on line {line}")
        for path, kind, text, heading, line in rows
    ]


def _update_targets(changes: list[tuple[int, int | None]], links) -> None:
    if not changes:
        return
    with connection.cursor() as cursor:
        for start in range(0, len(changes), 10000):
            part = changes[start : start + 10000]
            cursor.execute(
                f"UPDATE {links._meta.db_table} AS l SET target_id = v.target "
                "FROM unnest(%s::bigint[], %s::bigint[]) AS v(id, target) WHERE l.id = v.id",
                [[pk for pk, _ in part], [target for _, target in part]],
            )


def links_resolve_models(collection_id: int, *, documents=Document, links=DocumentLink) -> LinkResolution:
    """`links_resolve` with the models given (a data migration passes its historical ones)."""
    names = NoteNames.of(collection_id, documents=documents)
    changes: list[tuple[int, int | None]] = []
    unresolved: list[tuple[str, int, int, str]] = []
    memo: dict[tuple[str, str, bool], int | None] = {}
    rows = (
        links.objects.filter(source__collection_id=collection_id, source__active=True)
        .order_by()
        .values_list("id", "source__path", "kind", "target_text", "heading", "line", "target_id")
        .iterator(chunk_size=5000)
    )
    for pk, source_path, kind, target_text, heading, line, current in rows:
        key = (source_path.rpartition("/")[0], target_text, kind == MARKDOWN)
        if key in memo:
            found = memo[key]
        else:
            found = memo[key] = names.resolve(source_path, target_text, kind)
        if found != current:
            changes.append((pk, found))
        if found is None:
            message = f"{LINK_PROBLEM_PREFIX}{link_written(kind, target_text, heading)} on line {line}"
            unresolved.append((source_path, line, pk, message))
    _update_targets(changes, links)
    # The links of notes that are gone point nowhere (they come back resolved with their note).
    gone = list(documents.objects.filter(collection_id=collection_id, active=False).values_list("pk", flat=True))
    if gone:
        links.objects.filter(source_id__in=gone, target__isnull=False).update(target=None)
    unresolved.sort()
    return LinkResolution(changed=len(changes), problems=[(path, message) for path, _, _, message in unresolved])


def link_written(kind: str, target_text: str, heading: str = "") -> str:
    """A link as its author would write it, for messages: [[Note#Heading]], ![[Embed]], (path.md)."""
    inner = target_text + (f"#{heading}" if heading else "")
    if kind == MARKDOWN:
        return f"({inner})"
    return f"{'!' if kind == 'embed' else ''}[[{inner}]]"
