"""Reads: collections as every face shows them (counts, sharing, problems, history), and the
contexts that describe their parts."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q

from indexing import errors
from indexing.access import Access, collection_suggestions, visible_collections
from indexing.models import Collection, FileProblem, PathContext
from indexing.paths import is_under
from indexing.replicas import replica_reads


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
    writable: bool
    writer_users: list[str]
    writer_groups: list[str]
    ignore: list[str]
    text_search_config: str
    language: str  # what its text search configuration stems: German, mixed (not stemmed)…
    contexts: list[dict] | None = None  # collection_detail only: [{path_prefix, text}]
    problem_list: list[dict] | None = None  # collection_detail only: [{path, severity, message}]
    history: dict | None = None  # collection_detail only: services.history.history_status

    def as_dict(self) -> dict:
        """The overview's fields (`collection list --json`, the faces' rows)."""
        return {k: getattr(self, k) for k in OVERVIEW_FIELDS}


OVERVIEW_FIELDS = (
    "name",
    "path",
    "mask",
    "title_from",
    "transclude",
    "language",
    "text_search_config",
    "documents",
    "inactive",
    "problems",
    "last_indexed_at",
    "visibility",
    "owner",
    "shared_users",
    "shared_groups",
    "writable",
    "writer_users",
    "writer_groups",
)


@replica_reads
def collections_overview(*, access: Access) -> list[CollectionDetail]:
    """Every collection `access` sees with its counts: the rows of `ls`, `collection list`, the
    API's and the web UI's collections, MCP's instructions and the status report."""
    return _overview(visible_collections(access))


def _overview(collections) -> list[CollectionDetail]:
    # its patterns are not a search's to compile (start-up)
    from indexing.language import language_label  # noqa: PLC0415 - start-up time (see above)

    # Ordered here: Meta.ordering does not apply to a query that aggregates.
    rows = (
        collections.prefetch_related("shared_users", "shared_groups", "writer_users", "writer_groups")
        .select_related("owner")
        .order_by("name")
        .annotate(
            active_documents=Count("documents", filter=Q(documents__active=True)),
            inactive_documents=Count("documents", filter=Q(documents__active=False)),
        )
    )
    problems = dict(
        FileProblem.objects.filter(collection__in=collections)
        .values("collection")
        .annotate(n=Count("id"))
        .values_list("collection", "n")
    )
    return [
        CollectionDetail(
            collection=c,
            name=c.name,
            path=c.root_path,
            mask=c.mask,
            title_from=c.title_from,
            transclude=c.transclude,
            documents=c.active_documents,
            inactive=c.inactive_documents,
            problems=problems.get(c.id, 0),
            last_indexed_at=c.last_indexed_at,
            ignore=list(c.ignore_patterns or []),
            text_search_config=c.text_search_config,
            language=language_label(c.text_search_config),
            **collection_sharing(c),
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
        "writable": collection.writable,
        "writer_users": sorted(u.get_username() for u in collection.writer_users.all()),
        "writer_groups": sorted(g.name for g in collection.writer_groups.all()),
    }


def collection_detail(*, name: str, access: Access, problems_limit: int | None = None) -> CollectionDetail:
    """One collection with everything a face shows of it (`pmd collection show`, GET
    /api/collections/NAME, the web UI's row); a collection `access` does not see is the
    CollectionNotFound of a name never created."""
    # Imported here: the history service (git, its subprocesses) is not a search's to load (start-up).
    from indexing.services.history import history_status  # noqa: PLC0415 - start-up time (see above)

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


def contexts_for(
    collection: Collection | None, path: str = "", *, all_contexts: list[PathContext] | None = None
) -> list[str]:
    """All context texts that apply to a path, from the most general to the most specific."""
    pool = (
        all_contexts
        if all_contexts is not None
        else list(PathContext.objects.filter(Q(collection__isnull=True) | Q(collection=collection)))
    )
    applicable = [
        c
        for c in pool
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
