"""Keyword search: Okapi BM25 over the passages of the keyword index, scored in one SQL statement.

The index holds passages (markdown sections, long ones cut at paragraph breaks; see
indexing/keyword/keyword_index.py). Each passage is scored with BM25, and a document scores
as its best passage:

score(p) = Σ_t idf(t) · qtf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·|p|/avgpl))
  idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5))          (Lucene's, never negative)
  tf     = tf_body + PMD_BM25_TITLE_WEIGHT · tf_title  (document title and the section's heading count more)
  N, df, avgpl: passages, passages holding t, average passage length, summed over the
  searched collections only (all collections when the search names none)
k1, b from PMD_BM25_K1 / PMD_BM25_B (Lucene's 0.9 / 0.4 by default).

A relevant section in a long mixed-topic note is thus found on its own merits, not diluted
by the rest of the note; a short note is one passage, scored exactly as a whole document.
Statistics are per collection, so a collection ranks the same whatever else is indexed.

Plain words are disjunctive (every lexeme found in any configuration of the searched
collections is scored); "phrases" are required (some passage of the document holds each
one) via the GIN-indexed tsvectors, -exclusions removed the same way, prefixes expand to
the 30 most frequent indexed lexemes of the searched collections.

A hit's line and snippet come from its best passage, cut from that passage's text alone
(its character range in the body), so the cost of a hit does not grow with the length of
its document.

Shown scores are the share of the query the best passage holds, weighted by rarity:
cover/ideal, where `ideal` = Σ idf·qtf over the query's words as the hit's collection's
configuration reads them (one entry per prefix; a word no searched passage holds counts with
the highest idf) and `cover` is the passage's BM25
sum with each term's tf saturation capped at 1 (one occurrence in a passage of average
length counts fully; more occurrences or a short passage earn no more, a long passage
less). A top hit holding all the query's rare words reads high, one matching only common
words reads low: lists are comparable and a weak top hit reads weak. Ranking is by BM25, and
the shown score follows the order: each hit below the top shows the top's share times its
BM25 relative to the top's (its own share stays in `scores["share"]`, which hybrid search uses).
"""

from __future__ import annotations

import json
import re
import time

from django.conf import settings

from indexing.keyword import WORD, has_cjk, prepare_text
from indexing.markdown import without_comments
from indexing.models import Collection, PathContext
from indexing.replicas import read_connection
from indexing.selectors import contexts_for
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
from search.retrieval.filters import filter_sql, matching_count, narrows_by_index
from search.retrieval.query_parser import ParsedQuery, parse_query

PREFIX_EXPANSIONS = 30
LISTED_DOCUMENTS = 5000  # a filter matching at most this many notes lists them before scoring
_LONG_LINE = 400
_LINE_ENDS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines splits at


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _tsquery_any(configs: list[str], texts: list[str], params: list) -> str:
    """SQL for 'the document contains any of these phrases' (in any configuration)."""
    parts = []
    for text in texts:
        for config in configs:
            parts.append("phraseto_tsquery(%s::regconfig, %s)")
            params += [config, text]
    return " || ".join(parts)


class _Statement:
    """The CTEs of the scoring statement and their parameters, kept in the order the SQL reads them."""

    def __init__(self, collection_ids: list[int] | None):
        self.collection_ids = collection_ids
        self.ctes: list[str] = []
        self.params: list = []

    def in_collections(self, column: str) -> str:
        """' AND <column> = ANY(ids)' when the search is restricted to collections."""
        if self.collection_ids is None:
            return ""
        self.params.append(self.collection_ids)
        return f" AND {column} = ANY(%s::bigint[])"


def _score_sql(
    parsed: ParsedQuery,
    configs: list[str],
    collection_ids: list[int] | None,
    limit: int,
    per_document: int = 1,
    full: bool = False,
    filters=None,
    list_matching: bool = False,
):
    """One statement: BM25 per passage, the top documents by their best passage, and what they show."""
    s = _Statement(collection_ids)
    _statistics(s)
    _query_words(s, parsed, configs)
    _required_and_excluded(s, parsed, configs)
    where, probe, fragment_params = _filtered(s, parsed, filters, list_matching)
    _scored(s, where)
    _top_documents(s, per_document=per_document, limit=limit, probe=probe, fragment_params=fragment_params)
    sql = _with_what_results_show(s, configs, full)
    return sql, s.params


def _statistics(s: _Statement) -> None:
    """N and the average passage length over the searched collections."""
    s.ctes.append(
        "st AS (SELECT coalesce(sum(s.n_passages), 0)::float8 AS n,"
        " greatest(coalesce(sum(s.total_length), 0)::float8 / greatest(coalesce(sum(s.n_passages), 0), 1), 1.0)"
        " AS avgdl FROM search_keyword_stats s WHERE true" + s.in_collections("s.collection_id") + ")"
    )


def _query_words(s: _Statement, parsed: ParsedQuery, configs: list[str]) -> None:
    """The query's lexemes with their weight and idf (qs, qv, q)."""
    # Each query word once per configuration (cfg); prefix expansions belong to every one (NULL).
    sources = [
        "SELECT c.cfg, u.lexeme, u.lexeme AS grp, cardinality(u.positions)::float8 AS qtf"
        " FROM unnest(%s::text[]) c(cfg), unnest(to_tsvector(c.cfg::regconfig, %s)) u"
    ]
    s.params += [configs, prepare_text(parsed.positive_text)]
    if parsed.prefixes:
        prefix_params = [_like_escape(prepare_text(p).strip().lower()) for p in parsed.prefixes]
        s.params.append(prefix_params)
        sources.append(
            "SELECT NULL::text, t.lexeme, 'prefix:' || p.prefix, 1.0::float8 FROM unnest(%s::text[]) p(prefix)"
            " CROSS JOIN LATERAL (SELECT tt.lexeme FROM search_keyword_term tt"
            " WHERE tt.lexeme LIKE p.prefix || '%%'"
            + s.in_collections("tt.collection_id")
            + " GROUP BY tt.lexeme ORDER BY sum(tt.df) DESC, tt.lexeme LIMIT "
            + str(PREFIX_EXPANSIONS)
            + ") t"
        )
    s.ctes.append("qs AS (" + " UNION ALL ".join(sources) + ")")
    s.ctes.append("qv AS (SELECT lexeme, min(grp) AS grp, max(qtf) AS qtf FROM qs GROUP BY lexeme)")
    s.ctes.append(
        "q AS (SELECT qv.lexeme, qv.grp, qv.qtf, ln(1 + (st.n - t.df + 0.5) / (t.df + 0.5)) AS idf"
        # A query word no searched passage holds stays in (df 0, the highest idf): it scores
        # nothing, but it counts in the query's ideal, so the shown share says it is missing.
        " FROM qv CROSS JOIN st CROSS JOIN LATERAL (SELECT coalesce(sum(tt.df), 0)::float8 AS df"
        " FROM search_keyword_term tt WHERE tt.lexeme = qv.lexeme" + s.in_collections("tt.collection_id") + ") t)"
    )


def _required_and_excluded(s: _Statement, parsed: ParsedQuery, configs: list[str]) -> None:
    """The documents holding every "phrase" (cand) and those holding an -exclusion (excl)."""
    if parsed.phrases:
        selects = []
        for phrase in parsed.phrases:  # each phrase in some passage of the document
            expr = _tsquery_any(configs, [prepare_text(phrase)], params_phrase := [])
            s.params.extend(params_phrase)
            selects.append(
                f"SELECT d.document_id FROM search_keyword_passage d WHERE d.tsv @@ ({expr})"
                + s.in_collections("d.collection_id")
            )
        s.ctes.append("cand AS (" + " INTERSECT ".join(selects) + ")")
    if parsed.excluded:
        expr = _tsquery_any(configs, [prepare_text(e) for e in parsed.excluded], params_excl := [])
        s.params.extend(params_excl)
        s.ctes.append(
            f"excl AS (SELECT d.document_id FROM search_keyword_passage d WHERE d.tsv @@ ({expr})"
            + s.in_collections("d.collection_id")
            + ")"
        )


def _filtered(s: _Statement, parsed: ParsedQuery, filters, list_matching: bool) -> tuple[list[str], str, list]:
    """The conditions on scored passages, and the probe that tests broad filters on each top document."""
    where = []
    fragment, fragment_params = filter_sql(filters, "d")
    probe = ""  # broad filters: tested on each scored document instead (see _top_documents)
    if fragment and list_matching:
        # The documents passing the filters (search.retrieval.filters), once: only they are scored.
        s.ctes.append(
            "fdoc AS MATERIALIZED (SELECT d.id FROM indexing_document d WHERE d.active"
            + s.in_collections("d.collection_id")
            + fragment
            + ")"
        )
        s.params.extend(fragment_params)
        where.append("p.document_id IN (SELECT id FROM fdoc)")
    elif fragment:
        # Listing the documents that pass would read many (or all) of them: the scored documents are
        # looked up by id instead, best first, until `limit` pass (the OFFSET 0s keep the sorted
        # list whole and each test a lookup, not a join over every document).
        probe = " WHERE EXISTS (SELECT 1 FROM indexing_document d WHERE d.id = b.document_id" + fragment + " OFFSET 0)"
    if parsed.phrases:
        where.append("p.document_id IN (SELECT document_id FROM cand)")
    if parsed.excluded:
        where.append("p.document_id NOT IN (SELECT document_id FROM excl)")
    return where, probe, fragment_params


def _scored(s: _Statement, where: list[str]) -> None:
    """BM25 (raw) and the capped sum (cover) of every passage holding a query word."""
    k1 = float(settings.PMD_BM25_K1)
    b = float(settings.PMD_BM25_B)
    w_title = float(settings.PMD_BM25_TITLE_WEIGHT)
    s.params += [k1 + 1, k1, b, b, k1 + 1, k1, b, b, w_title]
    s.ctes.append(
        # ::float8 on every constant: literal floats are numeric in SQL, and numeric
        # arithmetic over thousands of postings costs several times the whole scan.
        "scored AS (SELECT p.passage_id, p.document_id, sum(q.idf * q.qtf * p.tf * %s::float8"
        " / (p.tf + %s::float8 * (1 - %s::float8 + %s::float8 * p.length / st.avgdl))) AS raw,"
        # cover: the same sum with each term's tf saturation capped at 1 (what one occurrence in
        # a passage of average length earns): the idf-weighted share of the query the passage holds
        " sum(q.idf * q.qtf * least(1::float8, p.tf * %s::float8"
        " / (p.tf + %s::float8 * (1 - %s::float8 + %s::float8 * p.length / st.avgdl)))) AS cover"
        " FROM q CROSS JOIN st CROSS JOIN LATERAL ("
        " SELECT pp.passage_id, pp.document_id, pp.tf_body + %s::float8 * pp.tf_title AS tf, pp.length"
        " FROM search_keyword_posting pp WHERE pp.lexeme = q.lexeme"
        + s.in_collections("pp.collection_id")
        + ") p"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " GROUP BY p.passage_id, p.document_id)"
    )


def _top_documents(s: _Statement, *, per_document: int, limit: int, probe: str, fragment_params: list) -> None:
    """The `limit` best documents (top) and the passages each shows (shown)."""
    if per_document <= 1:
        # A document is its best passage (ties: the earlier passage).
        s.ctes.append(
            "best AS (SELECT DISTINCT ON (s.document_id) s.document_id, s.passage_id, s.raw, s.cover, 1 AS r"
            " FROM scored s ORDER BY s.document_id, s.raw DESC, s.passage_id)"
        )
        if probe:
            s.ctes.append(
                "top AS (SELECT b.document_id, b.raw, b.cover FROM (SELECT * FROM best ORDER BY raw DESC,"
                " document_id OFFSET 0) b" + probe + " LIMIT %s)"
            )
            s.params.extend(fragment_params)
        else:
            s.ctes.append(
                "top AS (SELECT b.document_id, b.raw, b.cover FROM best b ORDER BY b.raw DESC, b.document_id LIMIT %s)"
            )
        s.ctes.append(
            "shown AS (SELECT b.document_id, b.passage_id, b.raw AS p_raw, b.r FROM best b"
            " JOIN top USING (document_id))"
        )
        s.params.append(limit)
        return
    # Also the next best passages of each document, for several hits per document.
    s.ctes.append(
        "ranked AS (SELECT s.document_id, s.passage_id, s.raw, s.cover,"
        " row_number() OVER (PARTITION BY s.document_id ORDER BY s.raw DESC, s.passage_id) AS r"
        " FROM scored s)"
    )
    if probe:
        s.ctes.append(
            "top AS (SELECT b.document_id, b.raw, b.cover FROM (SELECT * FROM ranked WHERE r = 1"
            " ORDER BY raw DESC, document_id OFFSET 0) b" + probe + " LIMIT %s)"
        )
        s.params.extend(fragment_params)
    else:
        s.ctes.append(
            "top AS (SELECT k.document_id, k.raw, k.cover FROM ranked k WHERE k.r = 1"
            " ORDER BY k.raw DESC, k.document_id LIMIT %s)"
        )
    s.ctes.append(
        "shown AS (SELECT k.document_id, k.passage_id, k.raw AS p_raw, k.r FROM ranked k"
        " JOIN top USING (document_id) WHERE k.r <= %s)"
    )
    s.params += [limit, per_document]


def _with_what_results_show(s: _Statement, configs: list[str], full: bool) -> str:
    """The whole statement: the top documents with the text of their best passage(s), cut from the
    body in the database (no second query, no whole body)."""
    sql = (
        "WITH " + ",\n".join(s.ctes) + "\nSELECT t.document_id, t.raw,"
        # The ideal per configuration (a hit is measured against its collection's reading of
        # the query): summed over all of them, "running" would count as both `run` (english)
        # and `running` (simple), and a word read by another configuration would be "missing".
        " (SELECT json_object_agg(h.cfg, h.s) FROM (SELECT g.cfg, sum(g.m) AS s"
        " FROM (SELECT w.cfg, w.grp, max(q.idf * w.qtf) AS m"
        " FROM (SELECT c.cfg, x.lexeme, min(x.grp) AS grp, max(x.qtf) AS qtf FROM unnest(%s::text[]) c(cfg)"
        " JOIN qs x ON x.cfg IS NULL OR x.cfg = c.cfg GROUP BY c.cfg, x.lexeme) w"
        " JOIN q ON q.lexeme = w.lexeme GROUP BY w.cfg, w.grp) g GROUP BY g.cfg) h) AS ideal,"
        " (SELECT json_object_agg(lexeme, idf) FROM q) AS lexemes,"
        " d.collection_id, d.docid, d.path, d.title, sh.p_raw, pa.start_line,"
        " substr(c.body, pa.start_char + 1, pa.end_char - pa.start_char),"
        " CASE WHEN %s THEN c.body END, t.cover, d.note_date, d.date_source"
        " FROM top t JOIN shown sh USING (document_id)"
        " JOIN search_keyword_passage pa ON pa.id = sh.passage_id"
        " JOIN indexing_document d ON d.id = t.document_id"
        " JOIN indexing_content c ON c.hash = d.content_hash"
        " ORDER BY t.raw DESC, t.document_id, sh.r"
    )
    s.params += [configs, full]
    return sql


def normalise(cover: float, ideal: float) -> float:
    """The shown score: the best passage's idf-weighted share of the query (see the module doc)."""
    if not ideal or ideal <= 0:
        return 0.0
    return max(0.0, min(1.0, cover / ideal))


def _shown_scores(hits: list[list]) -> list[list]:
    """Scores that fall with the order: the top hit shows its share of the query; each hit below
    shows that times its BM25 relative to the top's (the share itself stays in `scores["share"]`)."""
    if not hits:
        return hits
    top_raw, top_share = hits[0][0], hits[0][1]
    for hit in hits[1:]:
        hit[1] = top_share * max(0.0, min(1.0, hit[0] / top_raw)) if top_raw > 0 else 0.0
    return hits


def keyword_search(request: SearchRequest, *, snippets: bool = True) -> SearchResponse:
    """BM25 keyword search: the service behind `pmd search`, the API, the web UI and MCP.

    `snippets=False` (one hit per document) leaves snippets, lines, highlights and the
    "passage" score out, the first three to `complete_snippets` (hybrid search shows a few
    of the hits it fetches)."""
    started = time.perf_counter()
    response = SearchResponse(query=request.query, mode=Mode.KEYWORD)
    parsed = parse_query(request.query)
    if parsed.empty:
        return response
    collection_ids, collections, configs = _searched_collections(request)
    if parsed.phrases:
        # A phrase of stop words only is an empty tsquery, which no passage matches: being
        # required, it would wipe out every result. Dropped, like plain stop words.
        parsed.phrases = _searchable_phrases(parsed.phrases, configs)
        if parsed.empty:
            response.warnings.append("the query has only stop words or no searchable words")
            return response
    per_document = max(1, request.hits_per_document)
    rows = _best_passages(request, parsed, configs, collection_ids, per_document)
    response.timings["bm25"] = (time.perf_counter() - started) * 1000
    if not rows:
        if not parsed.phrases and not parsed.prefixes and parsed.terms and not _has_lexemes(parsed, configs):
            response.warnings.append("the query has only stop words or no searchable words")
        return response
    ideals, weights = _query_ideals_and_weights(rows[0])
    hits = [hit for hit in _shown_scores(_hits(rows, collections, ideals)) if hit[1] >= request.min_score]
    all_contexts = list(PathContext.objects.all())
    if not snippets and per_document == 1 and not request.full:
        _add_results_with_deferred_snippets(response, hits, _snippet_filler(weights, parsed), all_contexts)
    else:
        _add_results_with_snippets(response, hits, _Matcher(weights, parsed), request, all_contexts)
    response.timings["total"] = (time.perf_counter() - started) * 1000
    return response


def _searched_collections(request: SearchRequest) -> tuple[list[int] | None, dict[int, Collection], list[str]]:
    """The ids of the collections the request may search (None: all), those collections by id,
    and their text search configurations."""
    collection_ids = collection_ids_for(request.collections, request_access(request))
    collections_qs = Collection.objects.all()
    if collection_ids is not None:
        collections_qs = collections_qs.filter(id__in=collection_ids)
    collections = {c.id: c for c in collections_qs}
    configs = sorted({c.text_search_config for c in collections.values()}) or [settings.PMD_TEXT_SEARCH_CONFIG]
    return collection_ids, collections, configs


def _best_passages(
    request: SearchRequest,
    parsed: ParsedQuery,
    configs: list[str],
    collection_ids: list[int] | None,
    per_document: int,
) -> list[tuple]:
    """The rows of the scoring statement: the top documents with their shown passages, best first."""
    filters = request.filters if request.filters is not None and not request.filters.empty else None
    # A filter an index answers for at most LISTED_DOCUMENTS notes: those notes are listed first and
    # only they are scored; a broader one (or one no index answers) is tested on the scored notes.
    list_matching = (
        filters is not None
        and narrows_by_index(filters)
        and matching_count(filters, collection_ids, cap=LISTED_DOCUMENTS + 1) <= LISTED_DOCUMENTS
    )
    sql, params = _score_sql(
        parsed,
        configs,
        collection_ids,
        request.effective_limit(),
        per_document,
        request.full,
        filters,
        list_matching=list_matching,
    )
    with read_connection().cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _query_ideals_and_weights(row: tuple) -> tuple[dict[str, float], dict]:
    """The query's ideal per configuration and its lexemes' weights, which every row carries
    (as JSON text when the driver does not decode it)."""
    ideals = row[2] or {}
    if isinstance(ideals, str):
        ideals = json.loads(ideals)
    ideals = {cfg: float(v or 0) for cfg, v in ideals.items()}
    weights = row[3] or {}
    if isinstance(weights, str):
        weights = json.loads(weights)
    return ideals, weights


def _hits(rows: list[tuple], collections: dict[int, Collection], ideals: dict[str, float]) -> list[list]:
    """One hit per document, in the rows' order, with its shown passages gathered from the
    document's rows: [raw, score, collection, docid, path, title, body,
    [(start line, passage text)], (date, date source), share]."""
    fallback = max(ideals.values(), default=0.0)
    hits: list[list] = []
    segments: dict[int, list[tuple[int, str]]] = {}  # document -> its shown passages, best first
    for (
        doc_id,
        raw,
        _,
        _,
        collection_id,
        docid,
        path,
        title,
        _,
        start_line,
        text,
        body,
        cover,
        note_date,
        date_source,
    ) in rows:
        text = without_comments(text or "")  # `%%…%%` is neither searched nor shown
        if doc_id in segments:
            segments[doc_id].append(_after_frontmatter(start_line, text))
            continue
        segments[doc_id] = [_after_frontmatter(start_line, text)]
        collection = collections.get(collection_id) or Collection.objects.get(id=collection_id)
        share = normalise(float(cover or 0.0), ideals.get(collection.text_search_config, fallback))
        hits.append(
            [
                float(raw),
                share,
                collection,
                docid,
                path,
                title,
                body,
                segments[doc_id],
                (note_date.isoformat() if note_date else None, date_source or ""),
                share,
            ]
        )
    return hits


def _add_results_with_deferred_snippets(
    response: SearchResponse, hits: list[list], fill, all_contexts: list[PathContext]
) -> None:
    """One result per hit, its snippet left to `fill` (run only for the hits that are shown)."""
    for raw, score, collection, docid, path, title, _, segments, (day, source), share in hits:
        response.results.append(
            SearchResult(
                docid=docid,
                collection=collection.name,
                path=path,
                title=title,
                score=round(score, 4),
                context=contexts_for(collection, path, all_contexts=all_contexts),
                scores={"bm25": round(raw, 4), "share": round(share, 4)},
                date=day,
                date_source=source,
            )
        )
        defer_snippet(response.results[-1], fill, (collection.text_search_config, segments))


def _add_results_with_snippets(
    response: SearchResponse,
    hits: list[list],
    matcher: _Matcher,
    request: SearchRequest,
    all_contexts: list[PathContext],
) -> None:
    """Up to `hits_per_document` results per hit, each with its passage's snippet; a passage
    below the best scores the hit's score scaled by its passage score relative to the best's."""
    matcher.load((hit[2].text_search_config, text) for hit in hits for _, text in hit[7])
    for raw, score, collection, docid, path, title, body, segments, (day, source), share in hits:
        context = contexts_for(collection, path, all_contexts=all_contexts)
        passages = matcher.passages(segments, request.hits_per_document, collection.text_search_config)
        best = passages[0][0] if passages and passages[0][0] > 0 else 0.0
        for n, (p_score, line, snippet, highlights) in enumerate(passages):
            hit_score = score if n == 0 or not best else score * max(0.0, min(1.0, p_score / best))
            response.results.append(
                SearchResult(
                    docid=docid,
                    collection=collection.name,
                    path=path,
                    title=title,
                    score=round(hit_score, 4),
                    line=line,
                    snippet=snippet,
                    highlights=highlights,
                    context=context,
                    body=body if request.full else None,
                    scores={"bm25": round(raw, 4), "passage": round(p_score, 4), "share": round(share, 4)},
                    date=day,
                    date_source=source,
                )
            )


def _snippet_filler(weights: dict, parsed: ParsedQuery):
    """The batch that fills deferred keyword snippets: the best window of each hit's best
    passage, as keyword_search shows it (one lexeme query for the batch)."""

    def fill(items) -> None:
        matcher = _Matcher(weights, parsed)
        matcher.load((config, text) for _, (config, segments) in items for _, text in segments)
        for result, (config, segments) in items:
            _, result.line, result.snippet, result.highlights = matcher.passages(segments, 1, config)[0]

    return fill


def _searchable_phrases(phrases: list[str], configs: list[str]) -> list[str]:
    """The phrases whose tsquery is not empty in at least one of the configurations."""
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT p.i FROM unnest(%s::text[]) WITH ORDINALITY p(text, i) WHERE EXISTS (SELECT 1"
            " FROM unnest(%s::text[]) c(cfg) WHERE numnode(phraseto_tsquery(c.cfg::regconfig, p.text)) > 0)",
            [[prepare_text(p) for p in phrases], configs],
        )
        keep = {row[0] for row in cursor.fetchall()}
    return [p for i, p in enumerate(phrases, 1) if i in keep]


def _has_lexemes(parsed: ParsedQuery, configs: list[str]) -> bool:
    with read_connection().cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM unnest(%s::text[]) c(cfg), unnest(to_tsvector(c.cfg::regconfig, %s)) u",
            [configs, prepare_text(parsed.positive_text)],
        )
        return cursor.fetchone()[0] > 0


# --- snippets --------------------------------------------------------------------------


def _after_frontmatter(first_line: int, text: str) -> tuple[int, str]:
    """A passage without the note's frontmatter (the first passage holds it): its words are
    searched, but a snippet never starts in raw YAML."""
    if first_line != 1 or not text.startswith("---"):
        return first_line, text
    body = strip_frontmatter(text)
    return first_line + text[: len(text) - len(body)].count("\n"), body


_WORD_CACHE: dict[tuple[str, str], tuple[str, ...]] = {}
_WORD_CACHE_MAX = 200_000


class _Matcher:
    """Finds the windows of a hit's passages that match the query, with highlight offsets.

    Each passage text is scanned once, for the words that could match (one regex in C);
    words are mapped to lexemes by PostgreSQL itself (same configuration, same preparation
    as the index), in one batched query for all result passages, and cached."""

    def __init__(self, weights: dict[str, float], parsed: ParsedQuery):
        self.weights = {k: float(v) for k, v in weights.items()}
        self.prefixes = tuple(p.lower() for p in parsed.prefixes)
        self.heads = {lex[:2] for lex in self.weights}
        self.cjk = [lex for lex in self.weights if has_cjk(lex)]
        self.hits: dict[str, dict[str, tuple[float, str]]] = {}
        self.found: dict[int, list[tuple[int, int, str]]] = {}  # id(text) -> candidate words (start, end, word)
        # The words that could match: those starting with a query lexeme's first two letters
        # or with a prefix. C++/C#/CJK lexemes need the general path (every word, filtered).
        starts = sorted(self.heads | set(self.prefixes))
        special = self.cjk or any(lex.endswith(("plusplus", "sharp")) for lex in self.weights)
        self.scan = (
            re.compile(
                r"(?i)(?<![^\W_])(?<![^\W_]\.)(?:"
                + "|".join(map(re.escape, starts))
                + r")[^\W_]*(?:\.[^\W_]+)*(?:\+\+|#)?"
            )
            if starts and not special
            else None
        )

    def _candidate(self, word: str) -> bool:
        """Could this word match the query? (cheap: shares a lexeme's first letters, or a prefix)"""
        low = word.lower()
        return (
            low[:2] in self.heads
            or "+" in low
            or "#" in low
            or (self.cjk and has_cjk(low))
            or (bool(self.prefixes) and low.startswith(self.prefixes))
        )

    def load(self, docs) -> None:
        """Find the candidate words of `docs` ((configuration, text) pairs), map them to
        lexemes, and keep per configuration the words that match the query."""
        words: dict[str, set[str]] = {}
        for config, text in docs:
            if self.scan is not None:
                found = [(m.start(), m.end(), m.group(0)) for m in self.scan.finditer(text)]
            else:
                found = [(m.start(), m.end(), m.group(0)) for m in WORD.finditer(text) if self._candidate(m.group(0))]
            self.found[id(text)] = found
            words.setdefault(config, set()).update(w for _, _, w in found)
        wanted = {config: {w for w in found if (config, w) not in _WORD_CACHE} for config, found in words.items()}
        if any(wanted.values()):
            self._lexemes({config: found for config, found in wanted.items() if found})
        for config, found in words.items():
            hits = {}
            for word in found:
                weight, key = self._word_weight(word, config)
                if key is not None:
                    hits[word] = (weight, key)
            self.hits[config] = hits

    def _lexemes(self, wanted: dict[str, set[str]]) -> None:
        if len(_WORD_CACHE) > _WORD_CACHE_MAX:
            _WORD_CACHE.clear()
        with read_connection().cursor() as cursor:
            for config, words in wanted.items():
                ordered = sorted(words)
                cursor.execute(
                    "SELECT w.i, coalesce((SELECT array_agg(u.lexeme) FROM unnest(to_tsvector(%s::regconfig, w.t)) u),"
                    " '{}') FROM unnest(%s::text[]) WITH ORDINALITY w(t, i)",
                    [config, [prepare_text(w) for w in ordered]],
                )
                for i, lexemes in cursor.fetchall():
                    _WORD_CACHE[(config, ordered[i - 1])] = tuple(lexemes)

    def _word_weight(self, word: str, config: str) -> tuple[float, str | None]:
        low = word.lower()
        best, key = 0.0, None
        for lex in _WORD_CACHE.get((config, word), ()):
            w = self.weights.get(lex)
            if w is not None and w > best:
                best, key = w, lex
        if key is None and self.prefixes:
            for prefix in self.prefixes:
                if low.startswith(prefix):
                    return 1.0, "prefix:" + prefix
        return best, key

    @staticmethod
    def _units(first: int, text: str):
        """(line number, text, cut before, cut after, offset in `text`) pieces of a passage
        starting at line `first`: lines, long lines cut at spaces near SNIPPET_CHARS."""
        offset = 0
        for number, raw in enumerate(text.splitlines(keepends=True), start=first):
            line = raw.rstrip(_LINE_ENDS)
            if len(line) <= _LONG_LINE:
                yield number, line, False, False, offset
            else:
                for start, end in line_pieces(line):
                    piece = line[start:end]
                    lead = len(piece) - len(piece.lstrip())
                    yield number, piece.strip(), start > 0, end < len(line), offset + start + lead
            offset += len(raw)

    def passages(
        self, segments: list[tuple[int, str]], count: int, config: str
    ) -> list[tuple[float, int, str, list[tuple[int, int]]]]:
        """Up to `count` snippets from a document's shown passages ((first line, text) pairs,
        best first); the first comes from the best passage when that holds a match."""
        words = self.hits.get(config, {})
        units, scored_units, segment_of = [], [], []
        for n, (first, text) in enumerate(segments if count > 1 else segments[:1]):
            found = self.found.get(id(text), [])
            k = 0
            for number, piece, before, after, offset in self._units(first, text):
                end = offset + len(piece)
                while k < len(found) and found[k][0] < offset:
                    k += 1
                hits, matched = [], []
                while k < len(found) and found[k][1] <= end:
                    start, stop, word = found[k]
                    k += 1
                    hit = words.get(word)
                    if hit is not None:
                        hits.append((start - offset, stop - offset))
                        matched.append((hit[1], hit[0]))
                units.append((number, piece, before, after))
                scored_units.append((bool(matched), matched, hits))
                segment_of.append(n)
        first_units = segment_of.count(0)
        # A window is a unit plus the following short units of other lines, up to SNIPPET_CHARS.
        windows = []
        for i, (number, text, _, _) in enumerate(units):
            if not scored_units[i][0]:
                continue
            # distinct query words count fully, repeats a little
            j, size, seen, score = i, 0, set(), 0.0
            while j < len(units) and (
                j == i
                or (
                    size + len(units[j][1]) <= SNIPPET_CHARS
                    and units[j][0] != units[j - 1][0]
                    and segment_of[j] == segment_of[i]
                )
            ):
                for key, weight in scored_units[j][1]:
                    score += weight * 0.1 if key in seen else weight
                    seen.add(key)
                size += len(units[j][1]) + 1
                j += 1
                if j - i >= 3:
                    break
            if text.lstrip().startswith("#"):
                score *= 0.8  # the title is shown anyway: prefer a body passage
            windows.append((score, i, j))
        windows.sort(key=lambda w: (-w[0], w[1]))
        lead = next((w for w in windows if w[1] < first_units), None)
        if lead is not None:  # the best passage's best window first
            windows.remove(lead)
            windows.insert(0, lead)
        chosen, used = [], set()
        for score, i, j in windows:
            if any(k in used for k in range(i, j)):
                continue
            chosen.append((score, i, j))
            used.update(range(i, j))
            if len(chosen) >= count:
                break
        if not chosen:
            return [self._fallback(units[:first_units] or units, segments[0][0])]
        return [self._render(units, scored_units, score, i, j) for score, i, j in chosen]

    @staticmethod
    def _render(units, scored_units, score, i, j):
        parts, highlights, offset = [], [], 0
        for k in range(i, j):
            number, text, cont_before, cont_after = units[k]
            prefix = "…" if cont_before else ""
            if k > i:
                parts.append("\n")
                offset += 1
            parts.append(prefix + text + ("…" if cont_after else ""))
            for s, e in scored_units[k][2]:
                highlights.append((offset + len(prefix) + s, offset + len(prefix) + e))
            offset += len(parts[-1])
        return score, units[i][0], "".join(parts), highlights

    @staticmethod
    def _fallback(units, first_line: int = 1):
        for number, text, before, after in units:
            if text.strip() and text.strip() != "---":
                return 0.0, number, ("…" if before else "") + text + ("…" if after else ""), []
        return 0.0, first_line, "", []
