"""Typo correction from the searched collections' own words.

A plain query word that no passage of the searched collections holds (its lexeme is not in
`search_keyword_term` for them) is a likely typo. Its correction is the indexed lexeme nearest to it
by edit distance (fuzzystrmatch's `levenshtein_less_equal`, in the database: no new service), the
more frequent on a tie; shown as a word the notes themselves use (a stem such as `diabet` is never
shown: the surface form comes from a passage holding it). Only words with no match at all are
corrected, so a query whose words all occur somewhere is never touched (no loss on clean queries),
and whether the corrected query is used is decided by the caller (search.pipeline.dispatch: only
when the query as written finds nothing strong).

Words shorter than MIN_LENGTH, with digits or a capital after their first letter (names, acronyms),
phrases, prefixes and exclusions are left alone.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from django.conf import settings

from indexing.keyword import WORD, prepare_text
from indexing.models import Collection
from indexing.replicas import read_connection
from search.retrieval.query_parser import MIN_PREFIX, parse_query

MIN_LENGTH = 4
MAX_WORDS = 32  # words of one query looked at (a long question's typo may be its 20th word)
MAX_CORRECTED = 4  # unmatched words corrected in one query (names the notes lack cost a look-up each)
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


def _a_name(word: str) -> bool:
    """A capital after the first letter (ComYMV, aPKCz, dLNs, iPhone) marks a name or an acronym the
    notes may simply not hold, not a typo: people do not mistype into mixed case."""
    return word[1:] != word[1:].lower()


def _distance_limit(word: str) -> int:
    """Edits allowed: one in a short word, two (a transposition is two) in a longer one."""
    return 1 if len(word) < 5 else 2


def query_correction(query: str, *, collection_ids: list[int] | None) -> Correction | None:
    """The query with its unmatched words corrected from the vocabulary of the collections (None: all);
    None when every word matches somewhere or no close word exists."""
    if collection_ids == [] or not query:
        return None
    configs = _configs(collection_ids)
    words = [w for term in parse_query(query).terms for w in _LETTERS.findall(term) if len(w) >= MIN_LENGTH]
    words = list(dict.fromkeys(w for w in words if _PLAIN.match(w) and not _a_name(w)))
    words = words[:MAX_WORDS]
    if not words:
        return None
    scope, scope_params = _scope(collection_ids)
    with read_connection().cursor() as cursor:
        missing = _unmatched(cursor, words, configs, scope, scope_params)
        fixes: list[tuple[str, str]] = []
        parsed = parse_query(query)
        context = [w for w in _LETTERS.findall(parsed.positive_text) if w not in missing]
        for word, lexemes in list(missing.items())[:MAX_CORRECTED]:
            low = word.lower()
            lexeme = _nearest_by_one_edit(cursor, low, configs, scope, scope_params, context)
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


def _configs(collection_ids: list[int] | None) -> list[str]:
    collections = (
        Collection.objects.all() if collection_ids is None else Collection.objects.filter(id__in=collection_ids)
    )
    return sorted(set(collections.values_list("text_search_config", flat=True))) or [settings.PMD_TEXT_SEARCH_CONFIG]


def _scope(collection_ids: list[int] | None) -> tuple[str, list]:
    if collection_ids is None:
        return "", []
    return " AND t.collection_id = ANY(%s::bigint[])", [collection_ids]


def _unmatched(cursor, words: list[str], configs: list[str], scope: str, scope_params: list) -> dict[str, list[str]]:
    """The words none of whose lexemes (one per configuration) is indexed in the collections, with them."""
    cursor.execute(
        "SELECT w.i, array_agg(DISTINCT u.lexeme), bool_or(EXISTS (SELECT 1 FROM search_keyword_term t"
        " WHERE t.lexeme = u.lexeme" + scope + ")) FROM unnest(%s::text[]) WITH ORDINALITY w(t, i)"
        " CROSS JOIN unnest(%s::text[]) c(cfg) CROSS JOIN LATERAL unnest(to_tsvector(c.cfg::regconfig, w.t)) u"
        " GROUP BY w.i",
        [*scope_params, [prepare_text(w) for w in words], configs],
    )
    return {words[i - 1]: [lex for lex in lexemes if lex] for i, lexemes, found in cursor.fetchall() if not found}


_TYPED_LAST = re.compile(r"(?:^|\s)([^\W\d_][\w'.-]*)$")


def typed_prefix(query: str, *, collection_ids: list[int] | None) -> str:
    """The query being typed with its last word as a prefix (`datab` → `datab*`), when no note of the
    collections holds that word whole: the web box searches as you type. A whole word stays a word
    (its stem is what it matches; `databases*` would match no stem)."""
    match = _TYPED_LAST.search(query or "")
    if match is None or collection_ids == [] or len(match.group(1)) < MIN_PREFIX:
        return query
    word = match.group(1)
    scope, scope_params = _scope(collection_ids)
    with read_connection().cursor() as cursor:
        if not _unmatched(cursor, [word], _configs(collection_ids), scope, scope_params):
            return query
    return query[: match.end()] + "*"


# What a slip of the finger most often is, as the correction that undoes it: two letters swapped, a
# neighbouring key struck, a letter left out (corrected by inserting it) rather than one typed twice
# or struck by accident (corrected by deleting it), then any other letter.
EDIT_PRIOR = {"transposition": 1.0, "neighbour": 1.0, "insertion": 0.5, "substitution": 0.0, "deletion": 0.0}
_KEYBOARD = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_KEY_AT = {ch: (row, col) for row, keys in enumerate(_KEYBOARD) for col, ch in enumerate(keys)}


def _neighbours(a: str, b: str) -> bool:
    """Keys next to each other on a QWERTY keyboard (rows offset as on the keys)."""
    if a not in _KEY_AT or b not in _KEY_AT:
        return False
    (ra, ca), (rb, cb) = _KEY_AT[a], _KEY_AT[b]
    return abs(ra - rb) <= 1 and -1 <= (cb + rb * 0.5) - (ca + ra * 0.5) <= 1 and (ra, ca) != (rb, cb)


def _one_edit(word: str) -> dict[str, str]:
    """Every word one deletion, transposition, substitution or insertion away, with the kind of edit
    (a substitution by a neighbouring key is a `neighbour`)."""
    letters = sorted(set("abcdefghijklmnopqrstuvwxyz") | set(word))
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    out: dict[str, str] = {}

    def add(candidate: str, kind: str) -> None:
        if (
            candidate != word
            and len(candidate) >= MIN_LENGTH - 1
            and EDIT_PRIOR[kind] >= EDIT_PRIOR[out.get(candidate, "substitution")]
        ):
            out[candidate] = kind

    for a, b in splits:
        if b:
            add(a + b[1:], "deletion")
            for ch in letters:
                add(a + ch + b[1:], "neighbour" if _neighbours(b[0], ch) else "substitution")
        if len(b) > 1:
            add(a + b[1] + b[0] + b[2:], "transposition")
        for ch in letters:
            add(a + ch + b, "insertion")
    return out


CANDIDATES = 20  # one-edit words looked at, the most frequent first
# Fitted on the odd Cranfield queries (`pmd bench … --typos --split odd`): a candidate's log frequency,
# plus PRIOR_WEIGHT × its edit's likelihood, plus COOCCURRENCE_WEIGHT × log of the passages it shares
# with the query's other words.
COOCCURRENCE_WEIGHT = 2.0
PRIOR_WEIGHT = 1.0


def _nearest_by_one_edit(
    cursor, word: str, configs: list[str], scope: str, scope_params: list, context: list[str] = ()
) -> str | None:
    """The indexed lexeme of a word one edit away (each candidate read by the collections'
    configurations, so `vaccinaton` finds `vaccin`, the stem of `vaccination`) that best fits the
    query: the more passages it shares with the query's other words, then the more frequent. By
    frequency alone the rarest word of a query (the one that matters) loses to a common neighbour:
    `ctied` in a query on citations is `cited`, not `cities`."""
    posting_scope = scope.replace("t.collection_id", "p.collection_id")
    edits = _one_edit(word)
    cursor.execute(
        "WITH cand AS (SELECT u.lexeme, max(w.prior) AS prior, (SELECT sum(t.df)::float8 FROM search_keyword_term t"
        " WHERE t.lexeme = u.lexeme" + scope + ") AS df FROM unnest(%s::text[], %s::float8[]) w(t, prior)"
        " CROSS JOIN unnest(%s::text[]) c(cfg) CROSS JOIN LATERAL unnest(to_tsvector(c.cfg::regconfig, w.t)) u"
        " WHERE u.lexeme ~ '^[[:alpha:]]+$' AND EXISTS (SELECT 1 FROM search_keyword_term t WHERE t.lexeme = u.lexeme"
        + scope
        + ") GROUP BY u.lexeme ORDER BY df DESC, u.lexeme LIMIT "
        + str(CANDIDATES)
        + "),"
        " ctx AS (SELECT DISTINCT p.passage_id FROM search_keyword_posting p WHERE p.lexeme IN ("
        " SELECT u.lexeme FROM unnest(%s::text[]) c(cfg), unnest(to_tsvector(c.cfg::regconfig, %s)) u)"
        + posting_scope
        + ")"
        " SELECT cand.lexeme, cand.df, cand.prior,"
        " (SELECT count(*) FROM search_keyword_posting p WHERE p.lexeme = cand.lexeme"
        + posting_scope
        + " AND p.passage_id IN (SELECT passage_id FROM ctx))::float8 FROM cand",
        [
            *scope_params,
            list(edits),
            [EDIT_PRIOR[k] * PRIOR_WEIGHT for k in edits.values()],
            configs,
            *scope_params,
            configs,
            prepare_text(" ".join(context)),
            *scope_params,
            *scope_params,
        ],
    )
    rows = cursor.fetchall()
    if not rows:
        return None
    return max(rows, key=lambda r: (_fit(r[1], r[2], r[3]), r[1], r[0]))[0]


def _fit(df: float, prior: float, shared: float) -> float:
    """How well a candidate fits: log frequency, the edit's likelihood and the passages it shares
    with the query's other words (log)."""
    return math.log1p(df) + prior + COOCCURRENCE_WEIGHT * math.log1p(shared)


def _nearest_in_vocabulary(cursor, word: str, lexemes: list[str], scope: str, scope_params: list) -> str | None:
    """The indexed lexeme nearest the word or its stems by edit distance (up to two edits), the most
    frequent on a tie: fuzzystrmatch over the collections' vocabulary."""
    forms = list(dict.fromkeys([word, *lexemes]))
    limit = _distance_limit(word)
    cursor.execute(
        "SELECT x.lexeme FROM (SELECT t.lexeme, sum(t.df) AS df,"
        " (SELECT min(levenshtein_less_equal(t.lexeme, f, %s)) FROM unnest(%s::text[]) f) AS dist"
        " FROM search_keyword_term t WHERE length(t.lexeme) BETWEEN %s AND %s AND t.lexeme ~ '^[[:alpha:]]+$'"
        + scope
        + " GROUP BY t.lexeme) x WHERE x.dist <= %s ORDER BY x.dist, x.df DESC, x.lexeme LIMIT 1",
        [
            limit,
            forms,
            max(1, min(len(f) for f in forms) - limit),
            max(len(f) for f in forms) + limit,
            *scope_params,
            limit,
        ],
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
