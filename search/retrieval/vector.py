"""Vector search (`vsearch`): nearest chunks by cosine similarity through the HNSW index.

The query is embedded with the model's query prompt, the nearest chunks of the
configured fingerprint are read through that fingerprint's partial HNSW index
(see indexing/services/embedding/), and each document is represented by its
best chunk (or its K best with `hits_per_document`). Score = cosine similarity.

Making PostgreSQL use the index: on a small table the planner prefers a
sequential scan plus sort, or the btree on (fingerprint, content, seq) plus
sort. Both are ruled out for the nearest-chunk step with `enable_seqscan = off`
and `enable_sort = off` (local to the search transaction), which leaves the HNSW
ordered index scan. `hnsw.iterative_scan = relaxed_order` (pgvector 0.8) keeps
the scan going when the active-document / collection filter rejects candidates,
so a filtered search still fills its limit. `ef_search` is PMD_HNSW_EF_SEARCH,
raised to the number of chunks asked for. `exact=True` turns index scans off to
get the true nearest neighbours (the benchmark's ground truth).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
import time
from collections import defaultdict

from django.conf import settings
from django.db import transaction

from indexing import errors
from indexing.llm import embedding_prompts, get_backend
from indexing.markdown import without_comments
from indexing.models import (
    Collection,
    Document,
    EmbeddingFingerprint,
    LLMCache,
    PathContext,
)
from indexing.replicas import read_alias, read_connection
from indexing.selectors import contexts_for
from indexing.services.embedding import (
    distance_sql,
    embedding_config,
    embedding_underway,
    fingerprint_configured,
    pending_count,
)
from indexing.services.index_config import index_config_effective
from indexing.text import strip_frontmatter
from search.request import Mode, SearchRequest
from search.results import SearchResponse, SearchResult
from search.retrieval.common import (
    SNIPPET_CHARS,
    collection_ids_for,
    defer_snippet,
    line_pieces,
    request_access,
)
from search.retrieval.filters import filter_sql, matching_count, named

MAX_CANDIDATES = 10_000  # chunks read for one search (pgvector's iterative scan stops at 20k tuples)
MAX_EF_SEARCH = 1000  # pgvector's upper bound
# A filter matching at most this many documents is searched exactly: the distances of their
# chunks only, no HNSW index (a selective filter leaves the iterative scan short of the limit).
EXACT_FILTER_DOCUMENTS = 5000
SNIPPET_LINES = 4


def vector_search(
    request: SearchRequest, *, exact: bool = False, snippets: bool = True, chance: bool = False
) -> SearchResponse:
    """The `vsearch` service: one SearchRequest in, one SearchResponse out. `snippets=False`
    leaves snippets, lines and highlights to `complete_snippets` (hybrid search shows a few
    of the hits it fetches); `chance=True` adds the index's `chance_cosine` (hybrid's fusion)."""
    query = request.query.strip()
    if not query:
        raise errors.InvalidSearchInput("empty query")
    collection_ids = collection_ids_for(request.collections, request_access(request))
    config = embedding_config()
    response = SearchResponse(query=request.query, mode=Mode.VECTOR)
    if fingerprint_configured(config) is None:
        raise _not_embedded(config.model)

    started = time.perf_counter()
    # Backend errors (down, model missing) propagate as LLMBackendError: adapters show them.
    vector, cached = query_embedding(query, model=config.model)
    fingerprint = fingerprint_configured(config, dims=len(vector))
    if fingerprint is None and cached:  # the model changed size since: ask it again
        vector, cached = query_embedding(query, model=config.model, use_cache=False)
        fingerprint = fingerprint_configured(config, dims=len(vector))
    response.timings["embed_query"] = (time.perf_counter() - started) * 1000
    if fingerprint is None:
        raise _not_embedded(config.model, dims=len(vector))
    response = search_by_vector(
        request, vector, fingerprint, response=response, collection_ids=collection_ids, exact=exact, snippets=snippets
    )
    if chance:
        started = time.perf_counter()
        response.chance_score = chance_cosine(fingerprint)
        response.timings["chance"] = (time.perf_counter() - started) * 1000
    return response


def search_by_vector(
    request: SearchRequest,
    vector: list[float],
    fingerprint: EmbeddingFingerprint,
    *,
    collection_ids: list[int] | None,
    response: SearchResponse | None = None,
    exact: bool = False,
    snippets: bool = True,
) -> SearchResponse:
    """Vector search once the query is a vector of `fingerprint`, in the collections
    `collection_ids` (collection_ids_for: what the request may see): the filter count, the nearest
    chunks, the results. (`pmd bench --mode filtered` times this with synthetic vectors.)"""
    query = request.query.strip()
    if response is None:
        response = SearchResponse(query=request.query, mode=Mode.VECTOR)
    limit = request.effective_limit()
    hits = max(1, request.hits_per_document)
    wanted = min(MAX_CANDIDATES, max(40, limit * hits * 4))
    filters = request.filters if request.filters is not None and not request.filters.empty else None
    filtered_exact = False
    if filters is not None and not exact:
        started = time.perf_counter()
        matching = matching_count(filters, collection_ids, cap=EXACT_FILTER_DOCUMENTS + 1)
        response.timings["filter_count"] = (time.perf_counter() - started) * 1000
        if not matching:
            return response
        filtered_exact = matching <= EXACT_FILTER_DOCUMENTS
    started = time.perf_counter()
    rows = nearest_chunks(
        fingerprint, vector, k=wanted, collection_ids=collection_ids, exact=exact or filtered_exact, filters=filters
    )
    response.timings["nearest"] = (time.perf_counter() - started) * 1000

    started = time.perf_counter()
    response.results = _results(rows, request, query, limit, hits, snippets=snippets or request.full)
    response.timings["results"] = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    # Of the collections searched: a member is not told about documents they cannot see.
    missing = (
        0
        if collection_ids == []
        else pending_count(
            fingerprint,
            None
            if collection_ids is None
            else sorted(Collection.objects.filter(pk__in=collection_ids).values_list("name", flat=True)),
        )
    )
    response.timings["pending_check"] = (time.perf_counter() - started) * 1000
    if missing:
        underway = embedding_underway()
        response.warnings.append(
            f"{missing} document(s) have no embeddings yet and cannot be found by vector search: "
            + (f"they are {underway}, and join as they are done" if underway else "run `pmd embed`")
        )
    return response


CHANCE_SAMPLE = 1024  # chunks whose pairwise cosines give the chance cosine
CHANCE_MIN_PAIRS = 32  # fewer chunks than twice this: no chance cosine (raw cosines)
CHANCE_TTL = 600.0  # seconds an index's chance cosine is kept in this process
_CHANCE_SQL = """
WITH s AS (SELECT c.embedding AS e, row_number() OVER (ORDER BY c.content_hash, c.seq) AS r
             FROM indexing_chunk c WHERE c.fingerprint_id = %s ORDER BY c.content_hash, c.seq LIMIT %s),
     half AS (SELECT count(*) / 2 AS h FROM s)
SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY 1 - (a.e <=> b.e)), min(half.h)
  FROM s a CROSS JOIN half JOIN s b ON b.r = a.r + half.h"""
_chance: dict[int, tuple[float, float | None]] = {}


def chance_cosine(fingerprint: EmbeddingFingerprint) -> float | None:
    """The cosine two unrelated passages of this index have (the median over pairs of a sample),
    or None below 2·CHANCE_MIN_PAIRS chunks. Models differ widely (all-MiniLM-L6-v2 about 0.1-0.2,
    multilingual-e5-small about 0.82): fusion reads a vector list's commitment above it.

    The sample is the first chunks in content-hash order (a uniform, repeatable draw of notes
    read off the (fingerprint, content, seq) index: the same cost at any size), each paired
    with one from the sample's other half; kept CHANCE_TTL seconds per process."""
    now = time.monotonic()
    cached = _chance.get(fingerprint.pk)
    if cached is not None and now - cached[0] < CHANCE_TTL:
        return cached[1]
    with read_connection().cursor() as cursor:
        cursor.execute(_CHANCE_SQL, [fingerprint.pk, CHANCE_SAMPLE])
        row = cursor.fetchone()
    enough = row is not None and row[0] is not None and (row[1] or 0) >= CHANCE_MIN_PAIRS
    value = float(row[0]) if enough and math.isfinite(row[0]) else None
    _chance[fingerprint.pk] = (now, value)
    return value


def query_embedding(query: str, *, model: str, use_cache: bool = True) -> tuple[list[float], bool]:
    """The query's vector (query prompt applied) and whether it came from the LLM cache.
    Repeated queries (paging, agents retrying, hybrid sub-queries) skip the model."""
    text = embedding_prompts(model).format_query(query)
    key = hashlib.sha256(f"embed-query\0{model}\0{text}".encode()).hexdigest()
    if use_cache:
        entry = LLMCache.objects.filter(key=key, kind="embed_query").values_list("value", flat=True).first()
        if isinstance(entry, list) and entry:
            return [float(x) for x in entry], True
    vector = get_backend().embed([text], model=model)[0]
    LLMCache.objects.update_or_create(key=key, defaults={"kind": "embed_query", "value": vector})
    return vector, False


def _not_embedded(model: str, *, dims: int | None = None) -> errors.NotEmbedded:
    """Nothing to search for this model: say whether other vectors are in the way."""
    held = [str(f) for f in EmbeddingFingerprint.objects.all()]
    if held:
        overridden = [
            f"{r['name']}={r['value']} (the index is configured with {r['index']})"
            for r in index_config_effective()
            if r["mismatch"]
        ]
        why = (
            f"this process's environment sets {', '.join(overridden)}: unset it to search the index's vectors"
            if overridden
            else "replacing them means embedding everything again (`pmd config set` with --yes)"
        )
        return errors.NotEmbedded(
            f"the index holds embeddings from {', '.join(held)}, not from {model}{f' ({dims}d)' if dims else ''} "
            f"with the current chunk settings; vector search never mixes models: {why}",
            model=model,
            held=held,
        )
    underway = embedding_underway()
    if underway:
        return errors.NotEmbedded(
            f"nothing is embedded with {model} yet: the notes are {underway}", model=model, underway=True
        )
    return errors.NotEmbedded(f"nothing is embedded with {model} yet", model=model)


def nearest_chunks(
    fingerprint: EmbeddingFingerprint,
    vector: list[float],
    *,
    k: int,
    collection_ids: list[int] | None = None,
    exact: bool = False,
    ef_search: int | None = None,
    filters=None,
) -> list[tuple]:
    """The k chunks nearest to `vector` among active documents (of `collection_ids`, passing
    `filters`: search.filters.SearchFilters), with every such document that uses each chunk's
    content: rows of (content_hash, seq, char_start, char_end, start_line, distance, document
    id, docid, path, title, collection id, collection name, note date, date source).
    With filters, `exact` reads only the chunks of the matching documents."""
    return _run_nearest(
        fingerprint, vector, k=k, collection_ids=collection_ids, exact=exact, ef_search=ef_search, filters=filters
    )


def explain_nearest(
    fingerprint: EmbeddingFingerprint,
    vector: list[float],
    *,
    k: int = 10,
    collection_ids: list[int] | None = None,
    exact: bool = False,
    filters=None,
) -> str:
    """The query plan of the nearest-chunk step, as vector search runs it."""
    rows = _run_nearest(
        fingerprint, vector, k=k, collection_ids=collection_ids, exact=exact, explain=True, filters=filters
    )
    return "\n".join(r[0] for r in rows)


def _run_nearest(
    fingerprint: EmbeddingFingerprint,
    vector: list[float],
    *,
    k: int,
    collection_ids: list[int] | None,
    exact: bool,
    explain: bool = False,
    ef_search: int | None = None,
    filters=None,
) -> list[tuple]:
    dims, fp = int(fingerprint.dims), int(fingerprint.pk)
    if len(vector) != dims:
        raise errors.InvalidSearchInput(f"query vector has {len(vector)} dimensions, the index {dims}")
    literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"
    # `+ 0` keeps the planner off the collection_id index: a collection added since the
    # last ANALYZE is estimated at one row, and the plan then rescans the whole collection
    # for every chunk; probing each chunk's documents by content_hash is cheap at any size.
    collection_filter = "AND d.collection_id + 0 = ANY(%(collections)s)" if collection_ids is not None else ""
    fragment, params = named(*filter_sql(filters, "d"))
    collection_filter += fragment
    params.update({"query": literal, "k": int(k), "collections": collection_ids})
    # Through the index, each candidate chunk's documents are looked up by content hash (OFFSET 0
    # keeps that a lookup: as a semi-join the planner may instead rescan every matching document for
    # each candidate, estimating few). An exact scan reads every chunk: a join is right there.
    probe = "" if exact else " OFFSET 0"
    if fragment and exact:
        # The matching documents' chunks, each measured: exact, and cheap when few match. The
        # distances are taken in a materialized step, so no plan can turn to the HNSW index.
        nearest = f"""
        WITH matching AS MATERIALIZED (
            SELECT DISTINCT d.content_hash FROM indexing_document d WHERE d.active {collection_filter}
        ), measured AS MATERIALIZED (
            SELECT c.content_hash, c.seq, c.char_start, c.char_end, c.start_line,
                   {distance_sql(dims, "c.embedding", "%(query)s")} AS distance
            FROM matching m JOIN indexing_chunk c ON c.content_hash = m.content_hash AND c.fingerprint_id = {fp}
        ), nearest AS MATERIALIZED (
            SELECT * FROM measured ORDER BY distance LIMIT %(k)s
        )"""
    else:
        # Integers are inlined so the planner can match the partial index predicate.
        nearest = f"""
        WITH nearest AS MATERIALIZED (
            SELECT c.content_hash, c.seq, c.char_start, c.char_end, c.start_line,
                   {distance_sql(dims, "c.embedding", "%(query)s")} AS distance
            FROM indexing_chunk c
            WHERE c.fingerprint_id = {fp}
              AND EXISTS (SELECT 1 FROM indexing_document d
                          WHERE d.content_hash = c.content_hash AND d.active {collection_filter}{probe})
            ORDER BY distance
            LIMIT %(k)s
        )"""
    sql = (
        nearest
        + f"""
        SELECT n.content_hash, n.seq, n.char_start, n.char_end, n.start_line, n.distance,
               d.id, d.docid, d.path, d.title, d.collection_id, col.name, d.note_date, d.date_source
        FROM nearest n
        JOIN indexing_document d ON d.content_hash = n.content_hash AND d.active {collection_filter}
        JOIN indexing_collection col ON col.id = d.collection_id
        ORDER BY n.distance, col.name, d.path
    """
    )
    if fragment and exact:
        planner = {}
    elif exact:
        planner = {"enable_indexscan": "off", "enable_bitmapscan": "off"}
    else:
        planner = {
            "hnsw.ef_search": str(min(MAX_EF_SEARCH, max(ef_search or settings.PMD_HNSW_EF_SEARCH, int(k)))),
            "hnsw.iterative_scan": "relaxed_order",
            "enable_seqscan": "off",
            "enable_sort": "off",
        }
    with (
        transaction.atomic(using=read_alias()),
        read_connection().cursor() as cursor,
        _planner_settings(cursor, planner),
    ):
        cursor.execute(("EXPLAIN " if explain else "") + sql, params)
        return cursor.fetchall()


@contextlib.contextmanager
def _planner_settings(cursor, values: dict[str, str]):
    """Transaction-local planner settings, put back afterwards: when the caller already
    holds a transaction (ATOMIC_REQUESTS, tests) ours is only a savepoint, and a plain
    SET LOCAL would outlive this query."""
    names = list(values)
    if not names:
        yield
        return
    cursor.execute("SELECT " + ", ".join("current_setting(%s, true)" for _ in names), names)
    previous = cursor.fetchone()
    cursor.execute(
        "SELECT " + ", ".join("set_config(%s, %s, true)" for _ in names),
        [x for name in names for x in (name, values[name])],
    )
    try:
        yield
    finally:
        restore = [(name, old) for name, old in zip(names, previous) if old is not None]
        if restore and not cursor.db.needs_rollback:
            cursor.execute(
                "SELECT " + ", ".join("set_config(%s, %s, true)" for _ in restore),
                [x for pair in restore for x in pair],
            )


planner_settings = _planner_settings  # history search's vector retriever plans the same way


def _results(
    rows: list[tuple], request: SearchRequest, query: str, limit: int, hits: int, *, snippets: bool = True
) -> list[SearchResult]:
    """Best chunk(s) per document, in score order, shaped as SearchResults."""
    per_document: dict[int, list[tuple]] = defaultdict(list)
    order: list[int] = []
    for row in rows:
        doc_id = row[6]
        chosen = per_document[doc_id]
        if not chosen:
            order.append(doc_id)
        if len(chosen) < hits and not any(_overlaps(row, other) for other in chosen):
            chosen.append(row)
    picked: list[tuple] = []
    for doc_id in order:
        best = per_document[doc_id]
        if 1 - best[0][5] < request.min_score:
            continue
        picked.append(best)
        if len(picked) >= limit:
            break
    if not picked:
        return []

    doc_ids = [rows_[0][6] for rows_ in picked]
    bodies = dict(Document.objects.filter(pk__in=doc_ids).values_list("pk", "content__body")) if snippets else {}
    collections = {c.pk: c for c in Collection.objects.filter(pk__in={r[0][10] for r in picked})}
    all_contexts = list(PathContext.objects.all())
    terms = _query_terms(query)
    fill = None if snippets else _snippet_filler(terms)
    results = []
    for chunks in picked:
        for row in chunks:
            (
                _,
                seq,
                char_start,
                char_end,
                start_line,
                distance,
                doc_id,
                docid,
                path,
                title,
                collection_id,
                collection_name,
                note_date,
                date_source,
            ) = row
            if 1 - distance < request.min_score:
                continue
            if snippets:
                body = bodies.get(doc_id, "")
                snippet, line, highlights = chunk_snippet(body, char_start, char_end, terms)
            else:
                body, snippet, line, highlights = None, "", 1, []
            d = float(distance)
            # A NaN distance (e.g. a zero vector) is no match: min(1.0, nan) would read 1.0.
            score = max(0.0, min(1.0, 1.0 - d)) if math.isfinite(d) else 0.0
            results.append(
                SearchResult(
                    docid=docid,
                    collection=collection_name,
                    path=path,
                    title=title,
                    score=score,
                    line=line,
                    snippet=snippet,
                    highlights=highlights,
                    context=contexts_for(collections.get(collection_id), path, all_contexts=all_contexts),
                    date=note_date.isoformat() if note_date else None,
                    date_source=date_source or "",
                    body=body if request.full else None,
                    scores={"cosine": round(score, 6), "chunk": seq, "chunk_line": start_line},
                    explain={"chunk": seq, "chunk_chars": [char_start, char_end], "distance": float(distance)}
                    if request.explain
                    else None,
                )
            )
            if not snippets:
                defer_snippet(results[-1], fill, (doc_id, char_start, char_end))
    return results


def _snippet_filler(terms: set[str]):
    """The batch that fills deferred vector snippets: one query for the bodies."""

    def fill(items) -> None:
        bodies = dict(Document.objects.filter(pk__in={data[0] for _, data in items}).values_list("pk", "content__body"))
        for result, (doc_id, char_start, char_end) in items:
            result.snippet, result.line, result.highlights = chunk_snippet(
                bodies.get(doc_id, ""), char_start, char_end, terms
            )

    return fill


def _overlaps(a: tuple, b: tuple) -> bool:
    """Two chunks of one document that share text (the overlap) are one passage."""
    return a[0] == b[0] and a[2] < b[3] and b[2] < a[3]


_TERM = re.compile(r"\w+")
_STOP = frozenset(
    "a an and are as at be but by for from how in into is it of on or that the their there this to was what "
    "when where which who why will with".split()
)


def _query_terms(query: str) -> set[str]:
    return {t for t in (w.lower() for w in _TERM.findall(query)) if len(t) > 1 and t not in _STOP}


def _units(body: str, char_start: int, char_end: int):
    """(line number, text, cut before, cut after) pieces of the chunk's lines; a line
    longer than SNIPPET_CHARS is cut at spaces, keeping only pieces inside the chunk."""
    first = body.rfind("\n", 0, char_start) + 1  # the chunk may begin mid-line (overlap)
    number = body.count("\n", 0, first) + 1
    position = first
    while position < max(char_end, first + 1) and position <= len(body):
        newline = body.find("\n", position)
        line_end = len(body) if newline == -1 else newline
        line = body[position:line_end]
        if len(line) <= SNIPPET_CHARS:
            yield number, line, False, False
        else:
            for piece, end in line_pieces(line):
                if position + end > char_start and position + piece < char_end:
                    yield number, line[piece:end].strip(), piece > 0, end < len(line)
        if newline == -1:
            break
        position, number = newline + 1, number + 1


def chunk_snippet(body: str, char_start: int, char_end: int, terms: set[str]) -> tuple[str, int, list[tuple[int, int]]]:
    """A few lines (or pieces of long lines, marked with …) from the chunk: the window
    with the most query words, else its first non-blank ones. Returns (snippet, line
    number of its first line, highlights). A chunk holding the frontmatter and words after it is
    shown from those words (a chunk of frontmatter alone keeps its own lines: the reading of the
    snippet, indexing.snippets, shows a person the words after it)."""
    opening = len(body) - len(strip_frontmatter(body)) if body.startswith(("---", "+++")) else 0
    if char_start < opening < char_end:
        char_start = opening
    units = list(_units(without_comments(body), char_start, char_end))  # `%%…%%` is never shown
    if not units:
        return "", 1, []
    weights = [sum(1 for w in _TERM.findall(text.lower()) if w in terms) for _, text, _, _ in units]

    def shown(i: int) -> list[int]:
        """The units a snippet starting at unit i shows: a few short lines, or one piece."""
        taken, size = [], 0
        for k in range(i, min(len(units), i + SNIPPET_LINES)):
            number, text = units[k][0], units[k][1]
            if taken and (size + len(text) > SNIPPET_CHARS or number == units[taken[-1]][0]):
                break
            taken.append(k)
            size += len(text) + 1
        return taken

    best, best_score = None, 0
    for i in range(len(units)):
        score = sum(weights[k] for k in shown(i))
        if score > best_score:
            best, best_score = i, score
    if best is None:
        best = next((i for i, unit in enumerate(units) if unit[1].strip()), 0)
    parts = [
        (units[k][0], ("…" if units[k][2] else "") + units[k][1] + ("…" if units[k][3] else "")) for k in shown(best)
    ]
    while len(parts) > 1 and not parts[-1][1].strip():
        parts.pop()
    snippet = "\n".join(text for _, text in parts)
    highlights = [(m.start(), m.end()) for m in _TERM.finditer(snippet) if m.group(0).lower() in terms]
    return snippet, parts[0][0], highlights
