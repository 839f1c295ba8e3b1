"""The BM25 keyword index: passages of every document, kept in PostgreSQL, updated by every scan.

Design (tables in search/migrations/0005_keyword_passages.py):

- A document is indexed as **passages** (`split_passages`): its markdown sections, cut at ATX
  headings outside code fences (a heading with no text of its own joins the next section), and
  a section longer than about `PASSAGE_WORDS` words cut again at paragraph breaks; a note
  without headings is one passage, or a few by size. A passage's title field (weight A) is
  the document title and its heading(s); the rest is its body (weight D).
- `search_keyword_passage`: one row per passage: document, collection, ordinal, line range,
  character range in the body, length in tokens (stop words excluded) and the weighted
  `tsvector` (built with the collection's text search configuration after
  `indexing.keyword.analysis.prepare_text`), GIN-indexed for required phrases and exclusions.
  The ranges are what a hit shows: the snippet is cut from the best passage's text only.
- `search_keyword_posting`: the inverted index derived from those tsvectors in SQL
  (`unnest(tsv)`): per (passage, lexeme) the term frequency in the title field and in the
  body, the passage length, document and collection, all in a btree on (lexeme, collection),
  so scoring a query term is one index-only range scan. Postings follow their passage
  through a statement-level delete trigger.
- `search_keyword_term` ((lexeme, collection) → passages holding it) and
  `search_keyword_stats` (collection → passages, documents, total length) are maintained by
  statement-level triggers on the two tables above: BM25's statistics per collection, summed
  over the searched collections when a query runs. Passages cascade from `indexing_document`,
  so a removed collection or a deleted document updates the statistics too, whoever deletes
  it. Collections are referenced by id: renames need nothing.

Writing: one set-based statement per batch inserts the passages and their postings; the
triggers then upsert the statistics once per statement. Writers take turns (an advisory
lock held until commit), so two of them re-indexing the same document, or updating the same
statistics rows, neither collide nor deadlock. With more than one batch, the tsvectors are
computed by a second connection (see `_Analyser`) one batch ahead, so stemming and writing
use both cores.
A bulk load into an empty index (the first index of a large collection) drops the two
posting btrees and builds them again after the load: sorting half a million rows once
is several times cheaper than as many random btree insertions. It runs only when the
posting table can be locked at once (NOWAIT), so it never waits behind readers.

Scoring (search/retrieval/keyword.py) is Lucene's BM25 over the passages, a document scoring
as its best passage, in one SQL statement.
"""

from __future__ import annotations

import bisect
import math
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from django.db import DatabaseError, connection, transaction
from django.db.models import F

from indexing.keyword.analysis import prepare_text
from indexing.locks import KEYWORD_INDEX, advisory_lock_wait
from indexing.markdown import searchable_text
from indexing.models import Document, DocumentLink
from indexing.patterns import LazyPattern
from indexing.text import strip_frontmatter

# The heading's text is taken whole and its closing " ##" cut in Python (_heading): a lazy
# `(.+?)(?:[ \t]+#+)?[ \t]*$` retries its tail at every character, quadratic on a line of spaces.
_HEADING = LazyPattern(r"^ {0,3}#{1,6}[ \t]+(.+)$")
_FENCES = ("```", "~~~")
_FENCE = LazyPattern(r"(`{3,}|~{3,})(.*)")
_LINE_ENDS = "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines splits at
PASSAGE_WORDS = 700  # a longer section is cut at paragraph breaks (about one 900-token embedding chunk)
BATCH = 1000
BULK_MIN = 1000  # documents written into an empty index before the posting btrees are rebuilt instead
VACUUM_AFTER = 2000  # documents changed in one call before we refresh visibility/statistics


class Passage(NamedTuple):
    ordinal: int
    start_line: int  # 1-based, as str.splitlines counts
    end_line: int  # inclusive
    start_char: int  # [start_char, end_char) of the body
    end_char: int
    head: str  # title field: document title and headings
    body: str  # the passage's other lines


def _heading(line: str) -> str | None:
    """An ATX heading's text without its closing blanks and ` ###` ("## C#" keeps its "#")."""
    match = _HEADING.match(line)
    if match is None:
        return None
    text = match.group(1)
    kept = text.rstrip(" \t")
    if not kept:
        return text[:1]
    if kept.endswith("#"):
        before = kept.rstrip("#")
        if before.endswith((" ", "\t")) and before.rstrip(" \t"):
            return before.rstrip(" \t")
    return kept


def _sections(lines: list[str], skip: int = 0) -> tuple[list[tuple[int, int, list[str]]], set[int]]:
    """([first line, end line (exclusive), headings] per section, indexes of the heading lines).
    The first `skip` lines (the frontmatter) join the first section: a passage of frontmatter
    alone would give a snippet of raw YAML."""
    sections: list[tuple[int, int, list[str]]] = []
    heading_lines: set[int] = set()
    heads: list[str] = []
    start, has_body = 0, False
    fence = ""  # the open code fence's marker ("```", "~~~~", ...), "" outside fences
    for i, line in enumerate(lines):
        text = line.rstrip(_LINE_ENDS)
        stripped = text.lstrip()
        if not stripped or i < skip:
            continue
        if stripped.startswith(_FENCES):
            marker, rest = _FENCE.match(stripped).groups()
            if not fence:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence) and not rest.strip():
                fence = ""  # closed only by the same character, at least as long, nothing after
            has_body = True
            continue
        heading = _heading(text) if not fence and stripped[0] == "#" else None
        if heading is None:
            has_body = True
            continue
        if has_body:  # a heading closes a section with text; one with none joins the next
            sections.append((start, i, heads))
            start, heads, has_body = i, [], False
        heads.append(heading)
        heading_lines.add(i)
    sections.append((start, len(lines), heads))
    return sections, heading_lines


def _pieces(lines: list[str], start: int, end: int) -> list[tuple[int, int]]:
    """[start, end) line ranges of one section, cut at blank lines into about equal pieces
    of at most ~PASSAGE_WORDS words (anywhere once a piece reaches 1.5 × that)."""
    words = [len(lines[i].split()) for i in range(start, end)]
    total = sum(words)
    if total <= PASSAGE_WORDS:
        return [(start, end)]
    target = total / math.ceil(total / PASSAGE_WORDS)
    pieces, first, count = [], start, 0
    for i in range(start, end):
        count += words[i - start]
        blank = words[i - start] == 0
        if i + 1 < end and ((blank and count >= target) or count >= 1.5 * PASSAGE_WORDS):
            pieces.append((first, i + 1))
            first, count = i + 1, 0
    pieces.append((first, end))
    return pieces


def split_passages(title: str, body: str) -> list[Passage]:
    """The passages the keyword index scores for a document (at least one)."""
    lines = body.splitlines(keepends=True) or [""]
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    frontmatter = len(body) - len(strip_frontmatter(body))
    sections, heading_lines = _sections(lines, bisect.bisect_right(offsets, frontmatter) - 1 if frontmatter else 0)
    title = (title or "").strip()
    passages = []
    for start, end, heads in sections:
        own = [h.strip() for h in heads]
        head = "\n".join(([title] if title and title not in own else []) + own)
        for first, last in _pieces(lines, start, end):
            text = "".join(lines[i] for i in range(first, last) if i not in heading_lines)
            passages.append(
                Passage(len(passages), first + 1, max(first + 1, last), offsets[first], offsets[last], head, text)
            )
    return passages


# --- transclusion: what `![[Note#Section]]` adds to the note that writes it ---------------------------

EMBEDS_PER_NOTE = 20  # embeds of one note whose words it is found by (a bound on a note's index size)
EMBED_CHARS = 20_000  # characters of one embedded note or section


def _normal(heading: str) -> str:
    return " ".join(heading.split()).casefold()


def embedded_text(body: str, heading: str = "") -> str:
    """The text an embed shows: the section under `heading` (to the next heading of its level or
    higher), the block `^id` (its paragraph), or the note without its frontmatter; "" if none.
    Comments are still in the text returned."""
    text = strip_frontmatter(body)
    if not heading:
        return text[:EMBED_CHARS]
    lines = text.splitlines(keepends=True)
    if heading.startswith("^"):
        marker = heading
        for i, line in enumerate(lines):
            if line.rstrip().endswith(marker) and (
                len(line.rstrip()) == len(marker) or line.rstrip()[-len(marker) - 1].isspace()
            ):
                first = i
                if not line.strip()[: -len(marker)].strip():  # `^id` on a line of its own names the block above
                    first = i - 1
                    while first > 0 and lines[first].strip() and lines[first - 1].strip():
                        first -= 1
                    return "".join(lines[max(first, 0) : i])[:EMBED_CHARS]
                while first > 0 and lines[first - 1].strip():
                    first -= 1
                return "".join(lines[first : i + 1])[:EMBED_CHARS]
        return ""
    wanted, level, fence, kept = _normal(heading), 0, "", []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith(_FENCES):
            marker = _FENCE.match(stripped).group(1)
            fence = "" if fence and marker[0] == fence[0] else (fence or marker)
        found = _heading(line.rstrip(_LINE_ENDS)) if not fence and stripped.startswith("#") else None
        if found is not None:
            depth = len(stripped) - len(stripped.lstrip("#"))
            if level and depth <= level:
                break
            if not level and _normal(found) == wanted:
                level = depth
                continue
        if level:
            kept.append(line)
    return "".join(kept)[:EMBED_CHARS]


def _embed_passages(doc_ids: list[int]) -> dict[int, list[tuple[int, str, str]]]:
    """Per document of a collection that transcludes: (line of the embed, head, text) of the notes and
    sections it embeds (one level deep: what an embedded note embeds is not added)."""
    found: dict[int, list[tuple[int, str, str]]] = {}
    links = (
        DocumentLink.objects.filter(
            source_id__in=doc_ids,
            source__collection__transclude=True,
            kind=DocumentLink.Kind.EMBED,
            target__isnull=False,
            target__active=True,
        )
        .exclude(target_id=F("source_id"))
        .order_by("source_id", "line", "id")
        .values_list("source_id", "line", "heading", "target__title", "target__content__body")
    )
    for source, line, heading, title, body in links:
        mine = found.setdefault(source, [])
        if len(mine) >= EMBEDS_PER_NOTE:
            continue
        text = searchable_text(embedded_text(body or "", heading))
        if text.strip():
            section = "" if heading.startswith("^") else heading
            mine.append((line, f"{title or ''}\n{section}".strip(), text))
    return found


# The tsvector of a passage: title/headings weight A, body weight D.
_TSV = (
    "setweight(to_tsvector(s.config::regconfig, s.head), 'A') || "
    "setweight(to_tsvector(s.config::regconfig, s.body), 'D')"
)
_COLUMNS = "document_id, collection_id, ordinal, start_line, end_line, start_char, end_char"
_SRC_TEXT = (
    "SELECT " + ", ".join("s." + c for c in _COLUMNS.split(", ")) + ", " + _TSV + " AS tsv"
    " FROM unnest(%s::bigint[], %s::bigint[], %s::int[], %s::int[], %s::int[], %s::int[], %s::int[],"
    " %s::text[], %s::text[], %s::text[]) AS s(" + _COLUMNS + ", config, head, body)"
)
_SRC_TSV = (
    "SELECT " + ", ".join("s." + c for c in _COLUMNS.split(", ")) + ", s.tsv"
    " FROM unnest(%s::bigint[], %s::bigint[], %s::int[], %s::int[], %s::int[], %s::int[], %s::int[],"
    " %s::tsvector[]) AS s(" + _COLUMNS + ", tsv)"
)
_ANALYSE = (
    "SELECT (" + _TSV + ")::text FROM unnest(%s::text[], %s::text[], %s::text[])"
    " WITH ORDINALITY AS s(config, head, body, n) ORDER BY s.n"
)
_INSERT = (
    """
WITH src AS ({src}), psg AS (
    INSERT INTO search_keyword_passage ("""
    + _COLUMNS
    + """, length, tsv)
    SELECT """
    + _COLUMNS
    + """,
           coalesce((SELECT sum(cardinality(u.positions)) FROM unnest(src.tsv) u), 0), tsv
    FROM src
    RETURNING id, document_id, collection_id, length, tsv
)
INSERT INTO search_keyword_posting (passage_id, lexeme, collection_id, document_id, tf_title, tf_body, length)
SELECT p.id, u.lexeme, p.collection_id, p.document_id,
       cardinality(array_positions(u.weights, 'A')),
       cardinality(u.positions) - cardinality(array_positions(u.weights, 'A')),
       p.length
FROM psg p, unnest(p.tsv) u
"""
)
_INSERT_TEXT = _INSERT.format(src=_SRC_TEXT)
_INSERT_TSV = _INSERT.format(src=_SRC_TSV)


# Same definitions as search/migrations/0005_keyword_passages.py (rebuilt after a bulk load).
_POSTING_INDEXES = (
    (
        "ALTER TABLE search_keyword_posting DROP CONSTRAINT search_keyword_posting_pkey",
        "ALTER TABLE search_keyword_posting ADD CONSTRAINT search_keyword_posting_pkey "
        "PRIMARY KEY (passage_id, lexeme)",
    ),
    (
        "DROP INDEX search_keyword_posting_lexeme",
        "CREATE INDEX search_keyword_posting_lexeme ON search_keyword_posting (lexeme, collection_id)"
        " INCLUDE (document_id, passage_id, tf_title, tf_body, length)",
    ),
)


class _NotEmpty(Exception):
    pass


def _begin_bulk(cursor, count: int) -> bool:
    """Drop the posting btrees when `count` documents go into an empty index; True if done."""
    if count < BULK_MIN:
        return False
    cursor.execute("SELECT EXISTS (SELECT 1 FROM search_keyword_stats)")
    if cursor.fetchone()[0]:
        return False
    try:
        with transaction.atomic():  # a savepoint: rolling it back releases the lock again
            cursor.execute("LOCK TABLE search_keyword_posting IN ACCESS EXCLUSIVE MODE NOWAIT")
            cursor.execute("SELECT EXISTS (SELECT 1 FROM search_keyword_posting)")
            if cursor.fetchone()[0]:
                raise _NotEmpty
            for drop, _ in _POSTING_INDEXES:
                cursor.execute(drop)
    except (DatabaseError, _NotEmpty):
        return False  # in use or not empty: take the incremental path
    return True


def _end_bulk(cursor) -> None:
    cursor.execute("SET LOCAL maintenance_work_mem = '256MB'")
    for _, create in _POSTING_INDEXES:
        cursor.execute(create)


def _batch_columns(ids: list[int]) -> tuple[list, ...]:
    """The passages of the active documents among `ids`, as columns: document, collection,
    ordinal, first line, last line, first character, end character, configuration, title field, body."""
    cols: tuple[list, ...] = tuple([] for _ in range(10))
    rows = Document.objects.filter(id__in=ids, active=True).values_list(
        "id", "collection_id", "collection__text_search_config", "title", "content__body"
    )
    rows = list(rows)
    embeds = _embed_passages([row[0] for row in rows])
    for pk, coll, config, title, body in rows:
        body = searchable_text(body or "")
        passages = split_passages(title or "", body)
        if pk in embeds:
            passages += _embedding_passages(body, embeds[pk], len(passages))
        for p in passages:
            values = (
                pk,
                coll,
                p.ordinal,
                p.start_line,
                p.end_line,
                p.start_char,
                p.end_char,
                config or "simple",
                prepare_text(p.head).replace("\x00", ""),
                prepare_text(p.body).replace("\x00", ""),
            )
            for col, value in zip(cols, values):
                col.append(value)
    return cols


def _embedding_passages(body: str, embeds: list[tuple[int, str, str]], first: int) -> list[Passage]:
    """A passage per embed: the embedded words, shown (and linked) at the line that embeds them."""
    lines = body.splitlines(keepends=True) or [""]
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    passages = []
    for line, head, text in embeds:
        i = min(max(line, 1), len(lines)) - 1
        passages.append(Passage(first + len(passages), i + 1, i + 1, offsets[i], offsets[i + 1], head, text))
    return passages


class _Analyser:
    """Text analysis (to_tsvector) of the next batch on a second connection, in a thread.

    Stemming is the single largest cost of indexing; done by another backend it runs on
    the second core while this connection writes the previous batch. It reads no table,
    so it needs no snapshot of the writing transaction."""

    def __enter__(self):
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pmd-tsvector")
        return self

    def submit(self, cols: tuple[list, ...]):
        return cols, self._pool.submit(self._analyse, cols[7], cols[8], cols[9])

    @staticmethod
    def _analyse(configs: list[str], heads: list[str], bodies: list[str]) -> list[str]:
        if not configs:
            return []
        with connection.cursor() as cursor:  # the thread's own connection
            cursor.execute(_ANALYSE, [configs, heads, bodies])
            return [row[0] for row in cursor.fetchall()]

    def __exit__(self, *exc):
        self._pool.submit(lambda: connection.close()).result()  # the thread's connection
        self._pool.shutdown()


def keyword_index_update(*, changed_document_ids: list[int], removed_document_ids: list[int]) -> int:
    """Re-index changed documents and drop removed ones; returns documents (re)indexed."""
    ids = sorted(set(changed_document_ids) | set(removed_document_ids))
    if not ids:
        return 0
    indexed = 0
    with transaction.atomic(), connection.cursor() as cursor:
        # One writer at a time, until commit: another one's rows are then visible to our DELETE
        # (no duplicate key), and the triggers' statistics rows are never locked in crossed order.
        advisory_lock_wait(key=KEYWORD_INDEX)
        for start in range(0, len(ids), BATCH * 4):
            cursor.execute(
                "DELETE FROM search_keyword_passage WHERE document_id = ANY(%s)", [ids[start : start + BATCH * 4]]
            )
        changed = sorted(set(changed_document_ids) - set(removed_document_ids))
        bulk = _begin_bulk(cursor, len(changed))
        batches = (_batch_columns(changed[start : start + BATCH]) for start in range(0, len(changed), BATCH))
        if len(changed) <= BATCH:
            for cols in batches:
                if cols[0]:
                    cursor.execute(_INSERT_TEXT, list(cols))
                    indexed += len(set(cols[0]))
        else:
            with _Analyser() as analyser:
                pending = analyser.submit(next(batches))
                while pending is not None:
                    cols, future = pending
                    following = next(batches, None)  # read and prepared while batch `cols` is analysed
                    tsvs = future.result()
                    pending = analyser.submit(following) if following is not None else None
                    if cols[0]:
                        cursor.execute(_INSERT_TSV, [*cols[:7], tsvs])
                        indexed += len(set(cols[0]))
        if bulk:
            _end_bulk(cursor)
    if indexed >= VACUUM_AFTER:
        keyword_index_maintain()
    return indexed


def keyword_index_rebuild(*, collection_ids: list[int] | None = None) -> int:
    """Index every active document again (after a text search configuration change)."""
    qs = Document.objects.filter(active=True)
    if collection_ids is not None:
        qs = qs.filter(collection_id__in=collection_ids)
    ids = list(qs.values_list("id", flat=True))
    with connection.cursor() as cursor:
        if collection_ids is None:
            cursor.execute("DELETE FROM search_keyword_passage")
        else:
            cursor.execute("DELETE FROM search_keyword_passage WHERE collection_id = ANY(%s)", [collection_ids])
    return keyword_index_update(changed_document_ids=ids, removed_document_ids=[])


def keyword_index_maintain() -> None:
    """VACUUM ANALYZE the index tables so scoring stays index-only after bulk changes.

    Only possible outside a transaction (autovacuum gets there later otherwise)."""
    if connection.in_atomic_block or not connection.get_autocommit():
        return
    with connection.cursor() as cursor:
        for table in (
            "search_keyword_posting",
            "search_keyword_passage",
            "search_keyword_term",
            "search_keyword_stats",
        ):
            cursor.execute(f"VACUUM (ANALYZE) {table}")
