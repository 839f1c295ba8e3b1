"""Typo correction from the searched collections' own words (issue 31).

A plain query word that no passage of the searched collections holds (its lexeme is not in
`search_keyword_term` for them) is a likely typo. Its correction is the indexed lexeme nearest to it
by edit distance (fuzzystrmatch's `levenshtein_less_equal`, in the database: no new service), the
more frequent on a tie; shown as a word the notes themselves use (a stem such as `diabet` is never
shown: the surface form comes from a passage holding it). Only words with no match at all are
corrected, so a query whose words all occur somewhere is never touched (no loss on clean queries),
and whether the corrected query is used is decided by the caller (search.pipeline.dispatch: only
when the query as written finds nothing strong).

Words shorter than MIN_LENGTH, with digits, phrases, prefixes and exclusions are left alone.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection

from indexing.keyword import WORD, prepare_text
from indexing.models import Collection
from search.retrieval.query_parser import parse_query

MIN_LENGTH = 4
MAX_WORDS = 8  # words of one query looked at
_PLAIN = re.compile(r"^[^\W\d_]+$")
# the words of a term: letters and digits; a word with a digit (b12, h1n1) is a name, not a typo
_LETTERS = re.compile(r"[^\W_]+")


@dataclass
class Correction:
    """The query as corrected, and each (written, corrected) word."""

    text: str
    words: list[tuple[str, str]] = field(default_factory=list)

    def applied(self, text: str) -> str:
        """`text` (the query as written, filters included) with the same words corrected."""
        for written, corrected in self.words:
            text = re.sub(r"(?<!\w)" + re.escape(written) + r"(?!\w)", corrected, text, count=1)
        return text


def _distance_limit(word: str) -> int:
    """Edits allowed: one in a short word, two (a transposition is two) in a longer one."""
    return 1 if len(word) < 5 else 2


def query_correction(query: str, *, collection_ids: list[int] | None) -> Correction | None:
    """The query with its unmatched words corrected from the vocabulary of the collections (None: all);
    None when every word matches somewhere or no close word exists."""
    if collection_ids == [] or not query:
        return None
    collections = Collection.objects.all() if collection_ids is None else Collection.objects.filter(id__in=collection_ids)
    configs = sorted(set(collections.values_list("text_search_config", flat=True))) or [settings.PMD_TEXT_SEARCH_CONFIG]
    words = [w for term in parse_query(query).terms for w in _LETTERS.findall(term) if len(w) >= MIN_LENGTH]
    words = list(dict.fromkeys(w for w in words if _PLAIN.match(w)))
    words = words[:MAX_WORDS]
    if not words:
        return None
    scope, scope_params = "", []
    if collection_ids is not None:
        scope, scope_params = " AND t.collection_id = ANY(%s::bigint[])", [collection_ids]
    with connection.cursor() as cursor:
        # Each word's lexemes (one per configuration) and whether any is indexed in the collections.
        cursor.execute(
            "SELECT w.i, array_agg(DISTINCT u.lexeme), bool_or(EXISTS (SELECT 1 FROM search_keyword_term t"
            " WHERE t.lexeme = u.lexeme" + scope + ")) FROM unnest(%s::text[]) WITH ORDINALITY w(t, i)"
            " CROSS JOIN unnest(%s::text[]) c(cfg) CROSS JOIN LATERAL unnest(to_tsvector(c.cfg::regconfig, w.t)) u"
            " GROUP BY w.i",
            [*scope_params, [prepare_text(w) for w in words], configs],
        )
        missing = {words[i - 1]: [lex for lex in lexemes if lex] for i, lexemes, found in cursor.fetchall() if not found}
        fixes: list[tuple[str, str]] = []
        for word, lexemes in missing.items():
            low = word.lower()
            lexeme = _nearest_by_one_edit(cursor, low, configs, scope, scope_params)
            if lexeme is None:
                lexeme = _nearest_in_vocabulary(cursor, low, lexemes, scope, scope_params)
            if lexeme is None:
                continue
            surface = _surface_form(cursor, lexeme, low, configs, scope, scope_params)
            if surface and surface.lower() != low:
                fixes.append((word, surface))
    if not fixes:
        return None
    correction = Correction(text="", words=fixes)
    correction.text = correction.applied(query)
    return correction


def _one_edit(word: str) -> set[str]:
    """Every word one deletion, transposition, substitution or insertion away."""
    letters = set("abcdefghijklmnopqrstuvwxyz") | set(word)
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    out = {a + b[1:] for a, b in splits if b}
    out |= {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    out |= {a + ch + b[1:] for a, b in splits if b for ch in letters}
    out |= {a + ch + b for a, b in splits for ch in letters}
    out.discard(word)
    return {w for w in out if len(w) >= MIN_LENGTH - 1}


def _nearest_by_one_edit(cursor, word: str, configs: list[str], scope: str, scope_params: list) -> str | None:
    """The most frequent indexed lexeme of a word one edit away (each candidate read by the
    collections' configurations, so `vaccinaton` finds `vaccin`, the stem of `vaccination`)."""
    cursor.execute(
        "SELECT u.lexeme FROM unnest(%s::text[]) w(t) CROSS JOIN unnest(%s::text[]) c(cfg)"
        " CROSS JOIN LATERAL unnest(to_tsvector(c.cfg::regconfig, w.t)) u"
        " JOIN search_keyword_term t ON t.lexeme = u.lexeme" + scope + " WHERE u.lexeme ~ '^[[:alpha:]]+$'"
        + " GROUP BY u.lexeme ORDER BY sum(t.df) DESC, u.lexeme LIMIT 1",
        [sorted(_one_edit(word)), configs, *scope_params],
    )
    row = cursor.fetchone()
    return row[0] if row else None


def _nearest_in_vocabulary(cursor, word: str, lexemes: list[str], scope: str, scope_params: list) -> str | None:
    """The indexed lexeme nearest the word or its stems by edit distance (up to two edits), the most
    frequent on a tie: fuzzystrmatch over the collections' vocabulary."""
    forms = list(dict.fromkeys([word, *lexemes]))
    limit = _distance_limit(word)
    cursor.execute(
        "SELECT x.lexeme FROM (SELECT t.lexeme, sum(t.df) AS df,"
        " (SELECT min(levenshtein_less_equal(t.lexeme, f, %s)) FROM unnest(%s::text[]) f) AS dist"
        " FROM search_keyword_term t WHERE length(t.lexeme) BETWEEN %s AND %s AND t.lexeme ~ '^[[:alpha:]]+$'" + scope
        + " GROUP BY t.lexeme) x WHERE x.dist <= %s ORDER BY x.dist, x.df DESC, x.lexeme LIMIT 1",
        [limit, forms, max(1, min(len(f) for f in forms) - limit), max(len(f) for f in forms) + limit,
         *scope_params, limit],
    )
    row = cursor.fetchone()
    return row[0] if row else None


def _surface_form(cursor, lexeme: str, written: str, configs: list[str], scope: str, scope_params: list) -> str | None:
    """A word the notes use for `lexeme` (of a few passages holding it, the nearest to what was written,
    then the most frequent): `diabetes` for the stem `diabet`. Falls back to the lexeme itself."""
    cursor.execute(
        "SELECT substr(c.body, pa.start_char + 1, least(pa.end_char - pa.start_char, 20000))"
        " FROM search_keyword_posting t JOIN search_keyword_passage pa ON pa.id = t.passage_id"
        " JOIN indexing_document d ON d.id = t.document_id JOIN indexing_content c ON c.hash = d.content_hash"
        " WHERE t.lexeme = %s" + scope + " LIMIT 3",
        [lexeme, *scope_params],
    )
    head = lexeme[:3]
    seen: Counter = Counter()
    for (text,) in cursor.fetchall():
        for m in WORD.finditer(text or ""):
            word = m.group(0).lower()
            if word.startswith(head) and _PLAIN.match(word):
                seen[word] += 1
    if not seen:
        return lexeme
    candidates = sorted(seen)
    cursor.execute(
        "SELECT w.t FROM unnest(%s::text[]) w(t) WHERE EXISTS (SELECT 1 FROM unnest(%s::text[]) c(cfg),"
        " unnest(to_tsvector(c.cfg::regconfig, w.t)) u WHERE u.lexeme = %s)",
        [candidates, configs, lexeme],
    )
    matching = [w for (w,) in cursor.fetchall()]
    if not matching:
        return lexeme
    return min(matching, key=lambda w: (_edits(w, written), -seen[w], w))


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (short words: the tie-break between surface forms)."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]
