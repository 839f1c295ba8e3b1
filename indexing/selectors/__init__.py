"""Reads: finding documents and contexts the way users name them.

Document bodies always come from the database, never from the file system, so no
reference (`../`, absolute paths, symlinks) can read a file outside the index.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from django.db.models import Count, Q

from indexing import errors
from indexing.access import (
    Access,
    answers_visible_to,
    collection_suggestions,
    visible_collection_names,
    visible_collections,
)
from indexing.convert import unit_lines
from indexing.models import Collection, Content, Document, FileProblem, Job, PathContext
from indexing.replicas import read_connection, replica_reads
from indexing.paths import (
    SCHEME,
    absolute_path,
    glob_match,
    glob_regex,
    is_under,
    parse_reference,
    virtual_path,
)


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
    candidates = list(
        rows.filter(Q(path__icontains=stem[:40]) | Q(title__icontains=stem[:40]))
        .values_list("collection__name", "path")[:200]
    ) if stem else []
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
                name=ref.collection, suggestions=collection_suggestions(ref.collection, access))
        found = docs.filter(collection__name=ref.collection, path=ref.path).first()
        if found:
            return ResolvedDocument(found, ref.line, ref.unit)
        raise errors.DocumentNotFound(f"no document pmd://{ref.collection}/{ref.path}",
                               _suggest(ref.path, [ref.collection], access))
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


def document_lines(document: Document, *, from_line: int | None = None, max_lines: int | None = None) -> tuple[list[str], int]:
    """The document's lines in a window; returns (lines, first line number)."""
    lines = document.content.body.splitlines()
    start = max(1, from_line or 1)
    chosen = lines[start - 1:]
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
        return {"docid": doc.docid, "uri": doc.uri, "collection": doc.collection.name, "path": doc.path,
                "title": doc.title, "from_line": self.first, "lines": self.lines,
                "context": contexts_for(doc.collection, doc.path), "frontmatter": doc.frontmatter}


@replica_reads
def document_page(reference: str, *, access: Access, from_line: int | None = None, max_lines: int | None = None,
                  collections: list[str] | None = None) -> DocumentPage:
    """Resolve a reference (its `:LINE` is the first line unless `from_line` is given) and cut its window."""
    resolved = document_resolve(reference, access=access, collections=collections or None)
    doc = resolved.document
    if resolved.unit is not None:  # `report.pdf:p12`: that page's lines, from its marker on
        unit, name = resolved.unit
        found = unit_lines(doc.content.body, unit, name)
        if found is None:
            raise errors.DocumentNotFound(f"{doc.uri} has no {unit} {name}")
        first, count = found
        lines, first = document_lines(doc, from_line=from_line or first,
                                      max_lines=count if max_lines is None else min(max_lines, count))
        return DocumentPage(doc, lines, first, total_lines=len(doc.content.body.splitlines()))
    lines, first = document_lines(doc, from_line=from_line or resolved.line, max_lines=max_lines)
    total = len(doc.content.body.splitlines())
    if first > max(total, 1):
        raise errors.LinePastEnd(uri=doc.uri, line=first, lines=total)
    return DocumentPage(doc, lines, first, total_lines=total)


def contexts_for(collection: Collection | None, path: str = "", *, all_contexts: list[PathContext] | None = None) -> list[str]:
    """All context texts that apply to a path, from the most general to the most specific."""
    pool = all_contexts if all_contexts is not None else list(
        PathContext.objects.filter(Q(collection__isnull=True) | Q(collection=collection))
    )
    applicable = [
        c for c in pool
        if (c.collection_id is None and c.path_prefix == "")
        or (collection is not None and c.collection_id == collection.id and is_under(c.path_prefix, path))
    ]
    applicable.sort(key=lambda c: (c.collection_id is not None, len(c.path_prefix)))
    return [c.text for c in applicable]


def context_list(*, access: Access) -> list[PathContext]:
    """The global contexts and those of the collections `access` sees."""
    contexts = PathContext.objects.select_related("collection")
    ids = access.collection_ids()
    if ids is not None:
        contexts = contexts.filter(Q(collection__isnull=True) | Q(collection_id__in=ids))
    return list(contexts)


@replica_reads
def documents_list(target: str | None = None, *, access: Access, limit: int | None = None,
                   offset: int = 0) -> list[Document]:
    """`pmd ls` (and MCP's paged resources/list): documents of `collection[/prefix]` (or
    `pmd://collection/prefix`)."""
    qs = (_visible_documents(access).filter(active=True).select_related("collection")
          .order_by("collection__name", "path", "id"))
    if not target:
        return list(qs[offset:offset + limit] if limit else qs[offset:])
    text = target[len("pmd://"):] if target.startswith("pmd://") else target
    name, _, prefix = text.partition("/")
    if not visible_collections(access).filter(name=name).exists():
        raise errors.CollectionNotFound(name=name, suggestions=collection_suggestions(name, access))
    qs = qs.filter(collection__name=name)
    prefix = prefix.strip("/")
    if prefix:
        qs = qs.filter(Q(path=prefix) | Q(path__startswith=prefix + "/"))
    return list(qs[offset:offset + limit] if limit else qs[offset:])


@dataclass
class CollectionDetail:
    """One collection as every face shows it: its counts and who sees it; with `collection_detail`
    also its ignore patterns, contexts, file problems and git history. Faces shape it."""

    collection: Collection
    name: str
    path: str
    mask: str
    title_from: str
    transclude: bool
    documents: int
    inactive: int
    problems: int
    last_indexed_at: object  # datetime | None
    visibility: str
    owner: str | None
    shared_users: list[str]
    shared_groups: list[str]
    ignore: list[str]
    text_search_config: str
    language: str  # what its text search configuration stems: German, mixed (not stemmed)…
    contexts: list[dict] | None = None  # collection_detail only: [{path_prefix, text}]
    problem_list: list[dict] | None = None  # collection_detail only: [{path, severity, message}]
    history: dict | None = None  # collection_detail only: services.history.history_status

    def as_dict(self) -> dict:
        """The overview's fields (`collection list --json`, the faces' rows)."""
        return {k: getattr(self, k) for k in OVERVIEW_FIELDS}


OVERVIEW_FIELDS = ("name", "path", "mask", "title_from", "transclude", "language", "text_search_config", "documents", "inactive", "problems", "last_indexed_at", "visibility",
                   "owner", "shared_users", "shared_groups")


@replica_reads
def collections_overview(*, access: Access) -> list[CollectionDetail]:
    """Every collection `access` sees with its counts: the rows of `ls`, `collection list`, the
    API's and the web UI's collections, MCP's instructions and the status report."""
    return _overview(visible_collections(access))


def _overview(collections) -> list[CollectionDetail]:
    from indexing.language import language_label  # its patterns are not a search's to compile (start-up)

    # Ordered here: Meta.ordering does not apply to a query that aggregates.
    rows = collections.prefetch_related("shared_users", "shared_groups").select_related("owner").order_by("name").annotate(
        active_documents=Count("documents", filter=Q(documents__active=True)),
        inactive_documents=Count("documents", filter=Q(documents__active=False)),
    )
    problems = dict(
        FileProblem.objects.filter(collection__in=collections).values("collection").annotate(n=Count("id")).values_list("collection", "n")
    )
    return [
        CollectionDetail(
            collection=c, name=c.name, path=c.root_path, mask=c.mask, title_from=c.title_from, transclude=c.transclude,
            documents=c.active_documents,
            inactive=c.inactive_documents, problems=problems.get(c.id, 0), last_indexed_at=c.last_indexed_at,
            ignore=list(c.ignore_patterns or []), text_search_config=c.text_search_config,
            language=language_label(c.text_search_config), **collection_sharing(c),
        )
        for c in rows
    ]


def collection_sharing(collection: Collection) -> dict:
    """Who sees a collection, in the words every face shows."""
    return {
        "visibility": collection.visibility,
        "owner": collection.owner.get_username() if collection.owner_id else None,
        "shared_users": sorted(u.get_username() for u in collection.shared_users.all()),
        "shared_groups": sorted(g.name for g in collection.shared_groups.all()),
    }


def collection_detail(*, name: str, access: Access, problems_limit: int | None = None) -> CollectionDetail:
    """One collection with everything a face shows of it (`pmd collection show`, GET
    /api/collections/NAME, the web UI's row); a collection `access` does not see is the
    CollectionNotFound of a name never created."""
    from indexing.services.history import history_status

    rows = _overview(visible_collections(access).filter(name=name))
    if not rows:
        raise errors.CollectionNotFound(name=name, suggestions=collection_suggestions(name, access))
    detail = rows[0]
    collection = detail.collection
    problems = collection.problems.values("path", "severity", "message")
    detail.problem_list = list(problems[:problems_limit] if problems_limit else problems)
    detail.contexts = list(collection.contexts.values("path_prefix", "text"))
    detail.history = history_status(collection)
    return detail


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
            parts.append(f"{self.omitted} more matching document(s) not listed: total response limit reached "
                         f"({self.max_total_bytes:,} bytes)")
        return "; ".join(parts) + ": narrow the pattern, or read one with get"

    def as_dict(self) -> dict:
        """The JSON shape shared by `pmd multi-get --json`, /api/multi-get and the MCP tool."""
        return {
            "documents": [
                {"docid": i.document.docid, "uri": i.document.uri, "title": i.document.title,
                 "skipped": i.skipped_reason, "truncated": i.truncated,
                 "text": None if i.skipped_reason else "\n".join(i.lines)}
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
    from django.conf import settings

    total = max_total_bytes if max_total_bytes is not None else settings.PMD_MULTI_GET_MAX_TOTAL_BYTES
    if max_bytes is None:
        return min(DEFAULT_MULTI_GET_MAX_BYTES, total), total
    if max_bytes < 1:
        raise errors.MultiGetRefused(f"max_bytes must be a positive number of bytes, got {max_bytes}")
    if max_bytes > total:
        raise errors.MultiGetRefused(f"max_bytes={max_bytes:,} is above the total response limit of {total:,} bytes "
                            "(PMD_MULTI_GET_MAX_TOTAL_BYTES); read a larger document with get")
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
            for other in self.docs[self.order[doc.content_id]:]:
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
        pattern = parts[0][len("pmd://"):] if parts[0].startswith("pmd://") else parts[0]
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
            raise errors.MultiGetRefused(f"{len(parts):,} references: multi-get takes at most {MULTI_GET_MAX_REFERENCES} "
                                "(use a glob pattern for more)")
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


def jobs_visible_to(access: Access):
    """Jobs `access` may see: staff every job, a member only the jobs they started; and of the
    jobs about a collection, only those of collections they see.

    Jobs of the CLI, the watcher and periodic tasks have no owner (their messages can name
    server paths), so only staff see them. Anything else answers "no such job" (404), never 403.
    """
    jobs = Job.objects.select_related("collection")
    if not access.active:
        return jobs.none()
    if not access.is_staff:
        jobs = jobs.filter(created_by=access.user)
    ids = access.collection_ids()
    if ids is not None:
        jobs = jobs.filter(Q(collection__isnull=True) | Q(collection_id__in=ids))
    return jobs


def index_jobs_running(*, access: Access, limit: int = 10) -> list[dict]:
    """Indexing under way that `access` may see, with its progress line ("converting report.pdf
    (3 of 40 files, 120 of 800 pages)"): for the status report."""
    jobs = jobs_visible_to(access).filter(kind__in=[Job.Kind.INDEX, Job.Kind.UPDATE], state=Job.State.RUNNING)
    return [{"collection": job.collection.name if job.collection else "", "done": job.done, "total": job.total,
             "message": job.message} for job in jobs.order_by("-started_at")[:limit]]


def index_counts(*, access: Access) -> dict:
    """Counts for the status report, of what `access` sees only."""
    ids = access.collection_ids()
    docs = _visible_documents(access).aggregate(
        n_active=Count("id", filter=Q(active=True)), n_inactive=Count("id", filter=Q(active=False))
    )
    if ids is None:
        collections, contents = Collection.objects.count(), Content.objects.count()
        contexts, problems = PathContext.objects.count(), FileProblem.objects.count()
    else:
        collections = len(ids)
        contents = Content.objects.filter(documents__collection_id__in=ids).distinct().count()
        contexts = PathContext.objects.filter(Q(collection__isnull=True) | Q(collection_id__in=ids)).count()
        problems = FileProblem.objects.filter(collection_id__in=ids).count()
    return {
        "collections": collections,
        "documents": docs["n_active"],
        "inactive_documents": docs["n_inactive"],
        "contents": contents,
        "contexts": contexts,
        "problems": problems,
    }


def conversation_answers(*, access: Access, conversation) -> list:
    """The answers of one conversation of this user, oldest first (a follow-up's context)."""
    answers = list(answers_visible_to(access).of_conversation(conversation).order_by("created_at", "id"))
    if not answers:
        raise errors.ConversationNotFound(f"no conversation {conversation} of yours")
    return answers


def answers_recent(*, access: Access, limit: int = 20) -> list:
    """This user's latest answers, newest first (what the asker sees again)."""
    return list(answers_visible_to(access)[:limit])


def answer_costs() -> list[dict]:
    """Per model: answers, tokens in and out, median latency to the whole answer and to its first
    token (staff's view in the status report: what Ask costs, and whether a model got slow)."""
    from django.db.models import Aggregate, FloatField, Sum

    from indexing.models import Answer

    class Median(Aggregate):
        template = "percentile_cont(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
        output_field = FloatField()

    rows = (Answer.objects.exclude(model="").values("model")
            .annotate(answers=Count("id"), tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"),
                      median_ms=Median("total_ms"), median_first_token_ms=Median("first_token_ms"))
            .order_by("model"))
    return [{**row, "median_ms": round(row["median_ms"] or 0, 1),
             "median_first_token_ms": round(row["median_first_token_ms"] or 0, 1)} for row in rows]


# --- the search log (issue 31) ------------------------------------------------------------------------

WEAK_SCORE = 0.3  # a top hit holding less of the query than this: the notes barely answer it
SLOW_MS = 1000.0


def _collection_of_uri(field: str):
    """The collection a stored `pmd://collection/path` names (the text before its first slash)."""
    from django.db.models import CharField, Func, Value
    from django.db.models.functions import Substr

    return Func(Substr(field, len(SCHEME) + 1), Value("/"), Value(1), function="split_part", output_field=CharField())


def search_log_visible_to(access: Access, entries):
    """The logged searches `access` may see: staff everyone's, a member their own; a token limited to
    collections only the searches made through it (the log does not keep which collections a search
    covered, so only those are known to stay within its scope). And of those, none that opened or
    rated a note of a collection `access` does not see: that search is left out whole, its query and
    counts with it, like a search that never was."""
    from django.db.models import Exists, OuterRef

    from indexing.models import SearchFeedback

    if not access.active:
        return entries.none()
    if access.token_limited:
        entries = entries.filter(token=access.token)
    elif not access.is_staff:
        entries = entries.filter(user=access.user)
    if access.collection_ids() is None:
        return entries
    names = visible_collection_names(access)
    hidden_rating = (SearchFeedback.objects.filter(entry=OuterRef("pk"), uri__startswith=SCHEME)
                     .alias(collection=_collection_of_uri("uri")).exclude(collection__in=names))
    return (entries.alias(opened_in=_collection_of_uri("opened_uri"))
            .exclude(Q(opened_uri__startswith=SCHEME) & ~Q(opened_in__in=names))
            .exclude(Exists(hidden_rating)))


def search_log_report(*, access, days: int = 30, limit: int = 10, now=None) -> dict:
    """Over the last `days`: the most asked queries, those that found nothing or only weak hits (the
    team's content gaps), the slowest, and the most recent; of the searches `access` may see
    (`search_log_visible_to`)."""
    from datetime import timedelta

    from django.db.models import Avg, Count, Max, Q
    from django.utils import timezone

    from indexing.models import SearchLogEntry

    since = (now or timezone.now()) - timedelta(days=max(1, int(days)))
    entries = search_log_visible_to(access, SearchLogEntry.objects.filter(at__gte=since))

    def grouped(qs, order):
        rows = (qs.values("query").annotate(searches=Count("id"), people=Count("user", distinct=True),
                                            results=Max("results"), top_score=Max("top_score"),
                                            latency_ms=Avg("latency_ms"), last=Max("at"))
                .order_by(*order)[:limit])
        return [{**row, "last": row["last"].isoformat(), "latency_ms": round(row["latency_ms"] or 0, 1)} for row in rows]

    def recent(qs):
        return [{"at": e.at.isoformat(), "user": e.user.get_username() if e.user else "local", "face": e.face,
                 "mode": e.mode, "query": e.query, "results": e.results, "top_score": e.top_score,
                 "latency_ms": round(e.latency_ms, 1),
                 "opened": e.opened_uri if e.opened_uri.startswith(SCHEME) else ""}  # a note, never a link elsewhere
                for e in qs.select_related("user")[:limit]]

    return {
        "days": days, "since": since.isoformat(), "searches": entries.count(),
        "everyone": access.is_staff and not access.token_limited,
        "top": grouped(entries, ("-searches", "query")),
        "zero_results": grouped(entries.filter(results=0), ("-searches", "query")),
        "weak": grouped(entries.filter(results__gt=0).filter(Q(top_score__lt=WEAK_SCORE)), ("-searches", "query")),
        "slow": grouped(entries.filter(latency_ms__gte=SLOW_MS), ("-latency_ms", "query")),
        "opened": entries.filter(opened_uri__startswith=SCHEME).count(),
        "feedback": search_feedback_rows(entries, limit),
        "recent": recent(entries),
    }


@dataclass
class SectionText:
    """The indexed passage (a section, or a piece of a long one) holding a line, as stored text."""

    first_line: int  # 1-based line of the document where `text` starts
    text: str
    heading: str = ""  # the heading of the section a piece without its own belongs to


_SECTIONS_AT = """
SELECT w.i, pa.start_line, pa.start_char, pa.end_char, d.content_hash,
  CASE WHEN row_number() OVER (PARTITION BY d.content_hash ORDER BY w.i) = 1 THEN c.body END
FROM unnest(%s::text[], %s::text[], %s::int[]) WITH ORDINALITY AS w(coll, path, line, i)
JOIN indexing_collection co ON co.name = w.coll
JOIN indexing_document d ON d.collection_id = co.id AND d.path = w.path AND d.active
JOIN indexing_content c ON c.hash = d.content_hash
CROSS JOIN LATERAL (SELECT p.start_line, p.start_char, p.end_char FROM search_keyword_passage p
    WHERE p.document_id = d.id AND p.start_line <= greatest(w.line, 1) AND p.end_line >= w.line
    ORDER BY p.ordinal LIMIT 1) pa
"""


def sections_at(*, places: list[tuple[str, str, int]]) -> list[SectionText | None]:
    """Per (collection, path, line) already shown to the reader: the keyword index's passage holding
    that line (a section, or a piece of a long one, with its section's heading), or None when the
    document has no indexed passage there. One query; each body is read once however many hits it
    has, and cut here: Postgres finds a character offset by walking the UTF-8 string, costly in
    notebooks of many sections when Ask packs a dozen passages before the model's first token."""
    found: list[SectionText | None] = [None] * len(places)
    if not places:
        return found
    with read_connection().cursor() as cursor:
        cursor.execute(_SECTIONS_AT, [[c for c, _, _ in places], [p for _, p, _ in places],
                                      [max(1, int(n or 1)) for _, _, n in places]])
        rows = cursor.fetchall()
    bodies = {content: body for *_, content, body in rows if body is not None}
    for index, first, start, end, content, _ in rows:
        body = bodies[content]
        text = body[start:end]
        heading = ""
        if start > 0 and not text.lstrip(" ").startswith("#"):  # a piece of a long section: the heading above it
            above = body.rfind("\n#", 0, start) + 1 or (0 if body.startswith("#") else -1)
            if above >= 0:
                end_of_line = body.find("\n", above, start)
                heading = body[above:end_of_line if end_of_line >= 0 else start]
        found[index - 1] = SectionText(first_line=first, text=text, heading=heading.rstrip("\r"))
    return found


def search_feedback_rows(entries, limit: int) -> list[dict]:
    """The results rated from these searches, per (query, result): thumbs up and down, the most
    disliked first (what the notes answer badly)."""
    from django.db.models import Count, Max, Q

    from indexing.models import SearchFeedback

    rows = (SearchFeedback.objects.filter(entry__in=entries, uri__startswith=SCHEME).values("entry__query", "uri")
            .annotate(up=Count("id", filter=Q(helpful=True)), down=Count("id", filter=Q(helpful=False)), last=Max("at"))
            .order_by("-down", "up", "entry__query", "uri")[:limit])
    return [{"query": r["entry__query"], "uri": r["uri"], "up": r["up"], "down": r["down"],
             "last": r["last"].isoformat()} for r in rows]
