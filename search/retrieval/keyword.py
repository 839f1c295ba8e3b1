"""Keyword search: Okapi BM25 over the keyword index, scored in one SQL statement.

score(d) = Σ_t idf(t) · qtf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·|d|/avgdl))
  idf(t) = ln(1 + (N − df + 0.5)/(df + 0.5))          (Lucene's, never negative)
  tf     = tf_body + PMD_BM25_TITLE_WEIGHT · tf_title  (title/headings count more)
k1, b from PMD_BM25_K1 / PMD_BM25_B (Lucene's 0.9 / 0.4 by default).

Plain words are disjunctive (every lexeme found in any configuration of the searched
collections is scored); "phrases" are required via the GIN-indexed tsvector, -exclusions
removed the same way, prefixes expand to the 30 most frequent indexed lexemes.

Shown scores are 1 − exp(−2·raw/ideal), where `ideal` is the score of a document of
average length containing every query term once (Σ idf·qtf, one entry per prefix): a
hit that covers the query's rarest words reads high, one that matches only common words
reads low, and a long query does not inflate or deflate scores. It is a property of the
hit, not of its rank, so lists are comparable and not every top hit shows 100 %.
"""

from __future__ import annotations

import math
import re
import time

from django.conf import settings
from django.db import connection

from indexing.models import Collection, PathContext
from indexing.selectors import contexts_for
from search.index import WORD, has_cjk, prepare_text
from search.retrieval.common import SNIPPET_CHARS, collection_ids_for, line_pieces
from search.retrieval.query_parser import ParsedQuery, parse_query
from search.request import Mode, SearchRequest
from search.results import SearchResponse, SearchResult

PREFIX_EXPANSIONS = 30
_LONG_LINE = 400


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


def _score_sql(parsed: ParsedQuery, configs: list[str], collection_ids: list[int] | None, limit: int):
    k1 = float(settings.PMD_BM25_K1)
    b = float(settings.PMD_BM25_B)
    w_title = float(settings.PMD_BM25_TITLE_WEIGHT)
    params: list = []
    ctes = [
        "st AS (SELECT coalesce(s.n_documents, 0)::float8 AS n,"
        " greatest(coalesce(s.total_length, 0)::float8 / greatest(s.n_documents, 1), 1.0) AS avgdl"
        " FROM (VALUES (1)) v(id) LEFT JOIN search_keyword_stats s USING (id))",
    ]
    sources = [
        "SELECT u.lexeme, u.lexeme AS grp, cardinality(u.positions)::float8 AS qtf"
        " FROM unnest(%s::text[]) c(cfg), unnest(to_tsvector(c.cfg::regconfig, %s)) u"
    ]
    params += [configs, prepare_text(parsed.positive_text)]
    if parsed.prefixes:
        sources.append(
            "SELECT t.lexeme, 'prefix:' || p.prefix, 1.0::float8 FROM unnest(%s::text[]) p(prefix)"
            " CROSS JOIN LATERAL (SELECT lexeme FROM search_keyword_term"
            " WHERE lexeme LIKE p.prefix || '%%' ORDER BY df DESC LIMIT " + str(PREFIX_EXPANSIONS) + ") t"
        )
        params.append([_like_escape(prepare_text(p).strip().lower()) for p in parsed.prefixes])
    ctes.append(
        "qv AS (SELECT lexeme, min(grp) AS grp, max(qtf) AS qtf FROM (" + " UNION ALL ".join(sources) + ") x"
        " GROUP BY lexeme)"
    )
    ctes.append(
        "q AS (SELECT qv.lexeme, qv.grp, qv.qtf, ln(1 + (st.n - t.df + 0.5) / (t.df + 0.5)) AS idf"
        " FROM qv JOIN search_keyword_term t ON t.lexeme = qv.lexeme CROSS JOIN st)"
    )
    if parsed.phrases:
        doc_filter = []
        if collection_ids is not None:
            doc_filter.append("d.collection_id = ANY(%s)")
            params.append(collection_ids)
        conds = []
        for phrase in parsed.phrases:
            expr = _tsquery_any(configs, [prepare_text(phrase)], params_phrase := [])
            conds.append(f"d.tsv @@ ({expr})")
            params.extend(params_phrase)
        ctes.append("cand AS (SELECT d.document_id FROM search_keyword_document d WHERE "
                    + " AND ".join(doc_filter + conds) + ")")
    if parsed.excluded:
        expr = _tsquery_any(configs, [prepare_text(e) for e in parsed.excluded], params_excl := [])
        ctes.append(f"excl AS (SELECT d.document_id FROM search_keyword_document d WHERE d.tsv @@ ({expr}))")
        params.extend(params_excl)
    where = []
    posting_filter = ""
    if collection_ids is not None:
        posting_filter = " AND pp.collection_id = ANY(%s)"
    if parsed.phrases:
        where.append("p.document_id IN (SELECT document_id FROM cand)")
    if parsed.excluded:
        where.append("p.document_id NOT IN (SELECT document_id FROM excl)")
    ctes.append(
        # ::float8 on every constant: literal floats are numeric in SQL, and numeric
        # arithmetic over thousands of postings costs several times the whole scan.
        "scored AS (SELECT p.document_id, sum(q.idf * q.qtf * p.tf * %s::float8"
        " / (p.tf + %s::float8 * (1 - %s::float8 + %s::float8 * p.length / st.avgdl))) AS raw"
        " FROM q CROSS JOIN st CROSS JOIN LATERAL ("
        " SELECT pp.document_id, pp.tf_body + %s::float8 * pp.tf_title AS tf, pp.length"
        " FROM search_keyword_posting pp WHERE pp.lexeme = q.lexeme" + posting_filter + ") p"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " GROUP BY p.document_id)"
    )
    params += [k1 + 1, k1, b, b, w_title]
    if collection_ids is not None:
        params.append(collection_ids)
    # The top documents come back with what a result shows (no second query per search).
    sql = (
        "WITH " + ",\n".join(ctes)
        + ",\ntop AS (SELECT s.document_id, s.raw FROM scored s ORDER BY s.raw DESC, s.document_id LIMIT %s)"
        "\nSELECT t.document_id, t.raw,"
        " (SELECT sum(m) FROM (SELECT max(idf * qtf) AS m FROM q GROUP BY grp) g) AS ideal,"
        " (SELECT json_object_agg(lexeme, idf) FROM q) AS lexemes,"
        " d.collection_id, d.docid, d.path, d.title, c.body"
        " FROM top t JOIN indexing_document d ON d.id = t.document_id"
        " JOIN indexing_content c ON c.hash = d.content_hash"
        " ORDER BY t.raw DESC, t.document_id"
    )
    params.append(limit)
    return sql, params


def normalise(raw: float, ideal: float) -> float:
    if not ideal or ideal <= 0:
        return 0.0
    return 1.0 - math.exp(-2.0 * raw / ideal)


def keyword_search(request: SearchRequest) -> SearchResponse:
    """BM25 keyword search: the service behind `pmd search`, the API, the web UI and MCP."""
    started = time.perf_counter()
    response = SearchResponse(query=request.query, mode=Mode.KEYWORD)
    parsed = parse_query(request.query)
    if parsed.empty:
        return response
    collection_ids = collection_ids_for(request.collections)
    collections_qs = Collection.objects.all()
    if collection_ids is not None:
        collections_qs = collections_qs.filter(id__in=collection_ids)
    collections = {c.id: c for c in collections_qs}
    configs = sorted({c.text_search_config for c in collections.values()}) or [settings.PMD_TEXT_SEARCH_CONFIG]
    limit = request.effective_limit()
    sql, params = _score_sql(parsed, configs, collection_ids, limit)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    response.timings["bm25"] = (time.perf_counter() - started) * 1000
    if not rows:
        if not parsed.phrases and not parsed.prefixes and parsed.terms and not _has_lexemes(parsed, configs):
            response.warnings.append("the query has only stop words or no searchable words")
        return response
    ideal = float(rows[0][2] or 0)
    weights = rows[0][3] or {}
    if isinstance(weights, str):
        import json

        weights = json.loads(weights)
    hits = []
    for doc_id, raw, _, _, collection_id, docid, path, title, body in rows:
        score = normalise(float(raw), ideal)
        collection = collections.get(collection_id) or Collection.objects.get(id=collection_id)
        if score >= request.min_score:
            hits.append((float(raw), score, collection, docid, path, title, body))
    all_contexts = list(PathContext.objects.all())
    matcher = _Matcher(weights, parsed)
    matcher.load((collection.text_search_config, body) for _, _, collection, _, _, _, body in hits)
    for raw, score, collection, docid, path, title, body in hits:
        context = contexts_for(collection, path, all_contexts=all_contexts)
        passages = matcher.passages(body, request.hits_per_document, collection.text_search_config)
        best = passages[0][0] if passages and passages[0][0] > 0 else 0.0
        for n, (p_score, line, snippet, highlights) in enumerate(passages):
            hit_score = score if n == 0 or not best else score * max(0.0, min(1.0, p_score / best))
            response.results.append(SearchResult(
                docid=docid, collection=collection.name, path=path, title=title,
                score=round(hit_score, 4), line=line, snippet=snippet, highlights=highlights, context=context,
                body=body if request.full else None,
                scores={"bm25": round(raw, 4), "passage": round(p_score, 4)},
            ))
    response.timings["total"] = (time.perf_counter() - started) * 1000
    return response


def _has_lexemes(parsed: ParsedQuery, configs: list[str]) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM unnest(%s::text[]) c(cfg), unnest(to_tsvector(c.cfg::regconfig, %s)) u",
            [configs, prepare_text(parsed.positive_text)],
        )
        return cursor.fetchone()[0] > 0


# --- snippets --------------------------------------------------------------------------

_WORD_CACHE: dict[tuple[str, str], tuple[str, ...]] = {}
_WORD_CACHE_MAX = 200_000


class _Matcher:
    """Finds the passages of a document that match the query, with highlight offsets.

    Words are mapped to lexemes by PostgreSQL itself (same configuration, same
    preparation as the index), in one batched query for all result documents."""

    def __init__(self, weights: dict[str, float], parsed: ParsedQuery):
        self.weights = {k: float(v) for k, v in weights.items()}
        self.prefixes = tuple(p.lower() for p in parsed.prefixes)
        self.heads = {lex[:2] for lex in self.weights}
        self.cjk = [lex for lex in self.weights if has_cjk(lex)]
        self.hits: dict[str, dict[str, tuple[float, str]]] = {}
        self.finders: dict[str, re.Pattern | None] = {}

    def _candidate(self, word: str) -> bool:
        """Could this word match the query? (cheap: shares a lexeme's first letters, or a prefix)"""
        low = word.lower()
        return (low[:2] in self.heads or "+" in low or "#" in low or (self.cjk and has_cjk(low))
                or (bool(self.prefixes) and low.startswith(self.prefixes)))

    def load(self, docs) -> None:
        """Map the words of `docs` ((configuration, body) pairs) to lexemes, then keep only the words that match the query."""
        words: dict[str, set[str]] = {}
        for config, body in docs:
            words.setdefault(config, set()).update(WORD.findall(body))
        candidates = {config: [w for w in found if self._candidate(w)] for config, found in words.items()}
        wanted = {config: {w for w in found if (config, w) not in _WORD_CACHE} for config, found in candidates.items()}
        if any(wanted.values()):
            self._lexemes({config: found for config, found in wanted.items() if found})
        # Per configuration: matching word -> (weight, key), and one regex that finds the
        # lines holding any of them, so only those lines are tokenised again.
        for config, found in candidates.items():
            hits = {}
            for word in found:
                weight, key = self._word_weight(word, config)
                if key is not None:
                    hits[word] = (weight, key)
            self.hits[config] = hits
            self.finders[config] = (re.compile("|".join(sorted(map(re.escape, hits), key=len, reverse=True)))
                                    if hits else None)

    def _lexemes(self, wanted: dict[str, set[str]]) -> None:
        if len(_WORD_CACHE) > _WORD_CACHE_MAX:
            _WORD_CACHE.clear()
        with connection.cursor() as cursor:
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

    def _units(self, body: str):
        """(line number, text) pieces: lines, long lines cut at spaces near SNIPPET_CHARS."""
        for number, line in enumerate(body.splitlines(), start=1):
            if len(line) <= _LONG_LINE:
                yield number, line, False, False
                continue
            for start, end in line_pieces(line):
                yield number, line[start:end].strip(), start > 0, end < len(line)

    def passages(self, body: str, count: int, config: str) -> list[tuple[float, int, str, list[tuple[int, int]]]]:
        units = list(self._units(body))
        scored_units = []
        words = self.hits.get(config, {})
        finder = self.finders.get(config)
        for number, text, cont_before, cont_after in units:
            hits, found = [], []
            if finder is not None and finder.search(text):
                for match in WORD.finditer(text):
                    hit = words.get(match.group(0))
                    if hit is None:
                        continue
                    hits.append((match.start(), match.end()))
                    found.append((hit[1], hit[0]))
            scored_units.append((bool(found), found, hits))
        # A passage is a unit plus the following short units of other lines, up to SNIPPET_CHARS.
        windows = []
        for i, (number, text, _, _) in enumerate(units):
            if not scored_units[i][0]:
                continue
            # distinct query words count fully, repeats a little
            j, size, seen, score = i, 0, set(), 0.0
            while j < len(units) and (j == i or (size + len(units[j][1]) <= SNIPPET_CHARS and units[j][0] != units[j - 1][0])):
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
        chosen, used = [], set()
        for score, i, j in windows:
            if any(k in used for k in range(i, j)):
                continue
            chosen.append((score, i, j))
            used.update(range(i, j))
            if len(chosen) >= count:
                break
        if not chosen:
            return [self._fallback(units)]
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
    def _fallback(units):
        for number, text, before, after in units:
            if text.strip() and text.strip() != "---":
                return 0.0, number, ("…" if before else "") + text + ("…" if after else ""), []
        return 0.0, 1, "", []
