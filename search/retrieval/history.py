"""History search: the commits of collections that are git repositories (indexing/services/history.py).

Two retrievers over `indexing_commit`, each with the same filters in its SQL (collections the
caller may see, author, dates, changed-path globs), so `-n 10` gives ten matching commits:

- keyword: PostgreSQL full text over a weighted tsvector per commit (title A, message B,
  author and paths C, diff D), built with the collection's text search configuration; a
  plain query is disjunctive (any word), ranked by `ts_rank` normalised to 0..1 (rank/(rank+1));
- vector: the commits' text is chunked and embedded like a note's (the same worker, backends and
  fingerprint); a commit scores as its best chunk's cosine similarity.

search/pipeline/history.py fuses the two for hybrid search. A commit belongs to its collection:
a collection the caller may not see contributes nothing, exactly as in note search.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

from django.db import transaction

from indexing.access import Access
from indexing.errors import InvalidSearchInput
from indexing.keyword import WORD, prepare_text
from indexing.models import Commit, Document
from indexing.paths import Selection
from indexing.replicas import read_alias, read_connection
from indexing.services.embedding import distance_sql, embedding_config, fingerprint_configured
from search.filters import clean_glob, date_boundary, glob_to_regex
from search.retrieval.common import collection_ids_for
from search.retrieval.vector import planner_settings, query_embedding

HISTORY_MODES = ("keyword", "vector", "hybrid")
MAX_LIMIT = 1000
SNIPPET_LINES = 3


@dataclass
class HistoryRequest:
    query: str
    access: Access | None = None
    mode: str = "hybrid"  # keyword | vector | hybrid
    collections: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # globs over the changed files; any of them
    author: str = ""  # part of the author's name or e-mail, any case
    after: str | None = None  # as note search reads dates: 2025-01, "last week", 3d
    before: str | None = None
    limit: int = 10
    diff: bool = False  # include each commit's stored diff excerpt


@dataclass
class ChangedFile:
    status: str  # A M D R C T
    path: str
    old_path: str = ""
    docid: str | None = None  # the note at that path as it is now, when it still exists
    title: str = ""

    def as_dict(self, collection: str) -> dict:
        return {
            "status": self.status,
            "path": self.path,
            "old_path": self.old_path,
            "docid": self.docid,
            "uri": f"pmd://{collection}/{self.path}" if self.docid else None,
            "title": self.title,
        }


@dataclass
class CommitHit:
    collection: str
    sha: str
    title: str
    message: str
    author: str
    email: str
    date: str  # ISO 8601
    score: float  # 0..1
    files: list[ChangedFile] = field(default_factory=list)
    snippet: str = ""
    diff: str | None = None
    diff_truncated: bool = False
    scores: dict = field(default_factory=dict)

    @property
    def short(self) -> str:
        return self.sha[:10]

    def as_dict(self) -> dict:
        data = {
            "collection": self.collection,
            "sha": self.sha,
            "short": self.short,
            "title": self.title,
            "message": self.message,
            "author": self.author,
            "email": self.email,
            "date": self.date,
            "score": round(self.score, 6),
            "snippet": self.snippet,
            "files": [f.as_dict(self.collection) for f in self.files],
            "scores": self.scores,
        }
        if self.diff is not None:
            data["diff"] = self.diff
            data["diff_truncated"] = self.diff_truncated
        return data


@dataclass
class HistoryResponse:
    query: str
    mode: str
    results: list[CommitHit] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "query": self.query,
            "mode": self.mode,
            "results": [r.as_dict() for r in self.results],
            "warnings": list(self.warnings),
            "timings_ms": {k: round(v, 2) for k, v in self.timings.items()},
        }


# --- scope and filters ----------------------------------------------------------------------------


@dataclass
class HistoryScope:
    """What a request may read and must match, as SQL over a commit row `c`."""

    sql: str
    params: dict
    nothing: bool = False  # the caller sees no collection (or names none it may see)


def history_held(request: HistoryRequest) -> bool:
    """Whether any collection the request reads has commits: none does when none lies in a git
    work tree, and then a search says so rather than that nothing is embedded."""
    ids = collection_ids_for(request.collections, request.access)
    commits = Commit.objects.all() if ids is None else Commit.objects.filter(collection_id__in=ids)
    return commits.exists()


# The warning of a history search over collections without a git history.
NO_HISTORY = (
    "no commits to search: history reads the git log of collections in a git work tree, "
    "and the collections searched are in none (or have no commit yet)"
)


def history_scope(request: HistoryRequest) -> HistoryScope:
    if request.access is None:
        raise TypeError("HistoryRequest.access is required: Access.local_user() for the local user")
    globs = [glob_to_regex(clean_glob(g)) for g in request.paths if g and g.strip()]  # bad globs: an error always
    ids = collection_ids_for(request.collections, request.access)
    if ids == []:
        return HistoryScope("", {}, nothing=True)
    parts, params = [], {}
    if ids is not None:
        parts.append("c.collection_id = ANY(%(collections)s)")
        params["collections"] = ids
    if request.author and request.author.strip():
        # Whole words or names (\m, \M: where a word starts and ends), so `Ana` is not "Sumanapala"; in an
        # address too (`ana` matches ana.lima@example.org, not banana@example.org).
        needle = r"\m" + re.escape(" ".join(request.author.split())) + r"\M"
        parts.append("(c.author_name ~* %(author)s OR c.author_email ~* %(author)s)")
        params["author"] = needle
    if request.after:
        parts.append("c.committed_at >= %(after)s")
        params["after"] = date_boundary(request.after, what="after")
    if request.before:
        parts.append("c.committed_at < %(before)s")
        params["before"] = date_boundary(request.before, what="before")
    if globs:
        parts.append("EXISTS (SELECT 1 FROM unnest(c.paths) p WHERE p ~ ANY(%(paths)s::text[]))")
        params["paths"] = globs
    return HistoryScope("".join(f" AND {p}" for p in parts), params)


def _limit(request: HistoryRequest) -> int:
    return max(1, min(MAX_LIMIT, int(request.limit or 10)))


# --- keyword ----------------------------------------------------------------------------------------

# Every match is ranked on its small head vector (title, message, author, paths); the best
# RERANK_DEPTH of those (diff-only matches, with a head rank of 0, newest first) are ranked again
# on the whole vector, the diff included. A common word matching half the history costs a scan of
# small vectors, not of every diff.
RERANK_DEPTH = 500
# The query as a tsquery per text search configuration among the searched collections (usually
# one); passed to the search as a value, so the planner uses the GIN index of `tsv`.
_QUERIES = """
SELECT col.text_search_config, array_agg(col.id),
       (SELECT string_agg('(' || t::text || ')', ' | ')
        FROM unnest(%(words)s::text[]) w, LATERAL plainto_tsquery(col.text_search_config::regconfig, w) t
        WHERE t::text <> '')
FROM indexing_collection col {where}
GROUP BY col.text_search_config
"""
_KEYWORD = """
WITH best AS MATERIALIZED (
    SELECT c.id FROM indexing_commit c
    WHERE c.tsv @@ %(tsquery)s::tsquery AND c.collection_id + 0 = ANY(%(configured)s) {scope}
    ORDER BY ts_rank('{{0.1, 0.2, 0.4, 1.0}}', c.tsv_head, %(tsquery)s::tsquery, 32) DESC, c.committed_at DESC, c.id
    LIMIT %(depth)s
)
SELECT c.id, ts_rank('{{0.1, 0.2, 0.4, 1.0}}', c.tsv, %(tsquery)s::tsquery, 32) AS score, c.committed_at
FROM best JOIN indexing_commit c ON c.id = best.id
ORDER BY score DESC, c.committed_at DESC, c.id
LIMIT %(k)s
"""

_LATEST = """
SELECT c.id, 0.0 FROM indexing_commit c WHERE TRUE {scope}
ORDER BY c.committed_at DESC, c.id LIMIT %(k)s
"""


def query_words(query: str) -> list[str]:
    return [w for w in prepare_text(query).split() if any(ch.isalnum() for ch in w)][:64]


def history_keyword(request: HistoryRequest, scope: HistoryScope, *, k: int) -> list[tuple[int, float]]:
    """(commit id, score 0..1) best first; without words, the newest commits matching the filters."""
    if scope.nothing:
        return []
    words = query_words(request.query)
    with read_connection().cursor() as cursor:
        if not words:
            cursor.execute(_LATEST.format(scope=scope.sql), {**scope.params, "k": int(k)})
            return [(pk, float(score)) for pk, score in cursor.fetchall()]
        where = "WHERE col.id = ANY(%(collections)s)" if "collections" in scope.params else ""
        cursor.execute(_QUERIES.format(where=where), {**scope.params, "words": words})
        groups = [(ids, tsquery) for _, ids, tsquery in cursor.fetchall() if tsquery]
        rows = []
    # The planner prices `tsv @@` per row as if the vectors were small; on a sequential scan each
    # one is de-toasted (diffs), ten times slower than the GIN bitmap scan it is kept to here.
    with (
        transaction.atomic(using=read_alias()),
        read_connection().cursor() as cursor,
        planner_settings(cursor, {"enable_seqscan": "off"}),
    ):
        for ids, tsquery in groups:
            # `+ 0`: the GIN index finds the matches; the collection btree would de-toast them all
            cursor.execute(
                _KEYWORD.format(scope=scope.sql.replace("c.collection_id =", "c.collection_id + 0 =")),
                {
                    **scope.params,
                    "tsquery": tsquery,
                    "configured": ids,
                    "k": int(k),
                    "depth": max(RERANK_DEPTH, int(k)),
                },
            )
            rows += cursor.fetchall()
    if len(groups) > 1:
        rows.sort(key=lambda r: (-r[1], -r[2].timestamp(), r[0]))
    return [(pk, float(score)) for pk, score, _ in rows[:k]]


# --- vector -----------------------------------------------------------------------------------------


def history_embedded_fingerprint():
    """The configured fingerprint when some commit text is embedded with it (else None: no model call)."""
    fingerprint = fingerprint_configured(embedding_config())
    if fingerprint is None:
        return None
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM indexing_chunk ch JOIN indexing_commit c"
            " ON c.content_hash = ch.content_hash WHERE ch.fingerprint_id = %s)",
            [fingerprint.pk],
        )
        return fingerprint if cursor.fetchone()[0] else None


def history_vector(
    request: HistoryRequest, scope: HistoryScope, *, k: int, timings: dict | None = None
) -> list[tuple[int, float]]:
    """(commit id, cosine 0..1) best first, a commit as its best chunk. Empty when nothing is embedded."""
    if scope.nothing or not request.query.strip():
        return []
    fingerprint = history_embedded_fingerprint()
    if fingerprint is None:
        return []
    started = time.perf_counter()
    vector, _ = query_embedding(request.query.strip(), model=fingerprint.model)
    if timings is not None:
        timings["embed_query"] = (time.perf_counter() - started) * 1000
    dims, fp = int(fingerprint.dims), int(fingerprint.pk)
    if len(vector) != dims:
        raise InvalidSearchInput(f"query vector has {len(vector)} dimensions, the index {dims}")
    literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"
    wanted = min(10_000, max(40, k * 4))
    filtered = any(key in scope.params for key in ("author", "after", "before", "paths"))
    if filtered:  # measured exactly among the matching commits' chunks
        sql = f"""
        WITH measured AS MATERIALIZED (
            SELECT ch.content_hash, {distance_sql(dims, "ch.embedding", "%(query)s")} AS distance
            FROM indexing_commit c JOIN indexing_chunk ch ON ch.content_hash = c.content_hash
                 AND ch.fingerprint_id = {fp}
            WHERE TRUE {scope.sql}
        ), nearest AS MATERIALIZED (SELECT * FROM measured ORDER BY distance LIMIT %(k)s)"""
        planner = {}
    else:  # through the HNSW index, the scan going on while commits of other collections are skipped
        sql = f"""
        WITH nearest AS MATERIALIZED (
            SELECT ch.content_hash, {distance_sql(dims, "ch.embedding", "%(query)s")} AS distance
            FROM indexing_chunk ch
            WHERE ch.fingerprint_id = {fp}
              AND EXISTS (SELECT 1 FROM indexing_commit c WHERE c.content_hash = ch.content_hash {scope.sql})
            ORDER BY distance LIMIT %(k)s
        )"""
        planner = {
            "hnsw.ef_search": str(min(1000, max(200, wanted))),
            "hnsw.iterative_scan": "relaxed_order",
            "enable_seqscan": "off",
            "enable_sort": "off",
        }
    sql += f"""
        SELECT c.id, min(n.distance) AS distance
        FROM nearest n JOIN indexing_commit c ON c.content_hash = n.content_hash {scope.sql}
        GROUP BY c.id ORDER BY distance, c.id LIMIT %(limit)s
    """
    started = time.perf_counter()
    with (
        transaction.atomic(using=read_alias()),
        read_connection().cursor() as cursor,
        planner_settings(cursor, planner),
    ):
        cursor.execute(sql, {**scope.params, "query": literal, "k": wanted, "limit": int(k)})
        rows = cursor.fetchall()
    if timings is not None:
        timings["nearest"] = (time.perf_counter() - started) * 1000
    out = []
    for pk, distance in rows:
        d = float(distance)
        out.append((pk, max(0.0, min(1.0, 1.0 - d)) if math.isfinite(d) else 0.0))
    return out


# --- results ----------------------------------------------------------------------------------------


def commit_hits(scored: list[tuple[int, float, dict]], request: HistoryRequest) -> list[CommitHit]:
    """CommitHits for (commit id, score, component scores), in that order: each changed file linked
    to the note at that path today when it still exists (in a collection the caller sees: its own)."""
    ids = [pk for pk, _, _ in scored]
    commits = {c.pk: c for c in Commit.objects.filter(pk__in=ids).select_related("collection")}
    wanted_paths: dict[int, set[str]] = {}
    for commit in commits.values():
        wanted_paths.setdefault(commit.collection_id, set()).update(ch["path"] for ch in commit.changes)
    current: dict[tuple[int, str], tuple[str, str]] = {}
    for collection_id, paths in wanted_paths.items():
        for path, docid, title in Document.objects.filter(
            collection_id=collection_id, active=True, path__in=list(paths)
        ).values_list("path", "docid", "title"):
            current[(collection_id, path)] = (docid, title)
    words = {w.lower() for w in WORD.findall(request.query)}
    selections: dict[int, Selection] = {}
    hits = []
    for pk, score, parts in scored:
        commit = commits.get(pk)
        if commit is None:
            continue
        selection = selections.setdefault(commit.collection_id, Selection.of(commit.collection))
        if not all(selection.selects(p) for p in commit.paths):
            continue  # read under another mask (or before pmd read only the mask's files): not shown until read again
        files = []
        for change in commit.changes:
            docid, title = current.get((commit.collection_id, change["path"]), (None, ""))
            files.append(ChangedFile(change["status"], change["path"], change.get("old_path") or "", docid, title))
        hits.append(
            CommitHit(
                collection=commit.collection.name,
                sha=commit.sha,
                title=commit.title,
                message=commit.message,
                author=commit.author_name,
                email=commit.author_email,
                date=commit.committed_at.isoformat(),
                score=score,
                files=files,
                snippet=_snippet(commit, words),
                diff=commit.diff if request.diff else None,
                diff_truncated=commit.diff_truncated,
                scores=parts,
            )
        )
    return hits


def _snippet(commit: Commit, words: set[str]) -> str:
    """The message's body, or the diff lines that hold the query's words (a few lines)."""
    lines = [ln for ln in commit.message.split("\n")[1:] if ln.strip()]
    if words:
        matching = [
            ln for ln in lines + commit.diff.split("\n") if ln.strip() and words & {w.lower() for w in WORD.findall(ln)}
        ]
        if matching:
            return "\n".join(ln[:300] for ln in matching[:SNIPPET_LINES])
    return "\n".join(ln[:300] for ln in lines[:SNIPPET_LINES])
