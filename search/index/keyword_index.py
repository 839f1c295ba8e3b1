"""The BM25 keyword index: kept in PostgreSQL, updated incrementally by every scan.

Design (tables in search/migrations/0002_keyword_index.py):

- `search_keyword_document`: one row per active document: a weighted `tsvector`
  (title and markdown headings weight A, everything else weight D, built with the
  collection's text search configuration after `search.index.analysis.prepare_text`), its
  length in tokens (stop words excluded) and its collection. A GIN index on the tsvector
  serves the filters that need positions: required "phrases" and -exclusions.
- `search_keyword_posting`: the inverted index derived from that tsvector in SQL
  (`unnest(tsv)`): per (document, lexeme) the term frequency in the title/headings and in
  the body, plus the document length and collection, all INCLUDEd in a btree on lexeme,
  so scoring a query term is one index-only range scan. Postings follow their document
  through a statement-level delete trigger (migration 0003), not a per-row foreign key.
- `search_keyword_term` (lexeme → document frequency) and `search_keyword_stats`
  (number of documents, total length) are maintained by statement-level triggers on the
  two tables above. Rows cascade from `indexing_document`, so a removed collection or a
  deleted document updates the statistics too, whoever deletes it. Collections are
  referenced by id: renames need nothing.

Writing: one set-based statement per batch inserts the documents and their postings;
the triggers then upsert document frequencies once per statement. Writers take turns
(an advisory lock held until commit), so two of them re-indexing the same document, or
updating the same statistics rows, neither collide nor deadlock. With more than one
batch, the tsvectors are computed by a second connection (see `_Analyser`) one batch
ahead, so stemming and writing use both cores.
A bulk load into an empty index (the first index of a large collection) drops the two
posting btrees and builds them again after the load: sorting half a million rows once
is several times cheaper than as many random btree insertions. It runs only when the
posting table can be locked at once (NOWAIT), so it never waits behind readers.

Scoring (search/retrieval/keyword.py) is Lucene's BM25 over those rows, in one SQL statement.
"""

from __future__ import annotations

import re

from django.db import DatabaseError, connection, transaction

from indexing.models import Document
from indexing.locks import KEYWORD_INDEX, advisory_lock_wait
from search.index.analysis import prepare_text

_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$")
BATCH = 1000
BULK_MIN = 1000  # documents written into an empty index before the posting btrees are rebuilt instead
VACUUM_AFTER = 2000  # documents changed in one call before we refresh visibility/statistics


def split_fields(title: str, body: str) -> tuple[str, str]:
    """(title + headings, the rest of the body): the A and D fields of the tsvector."""
    heads, rest = [], []
    in_fence = False
    for line in body.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            heads.append(match.group(1))
        else:
            rest.append(line)
    if title and (not heads or heads[0].strip() != title.strip()):
        heads.insert(0, title)
    return "\n".join(heads), "\n".join(rest)


# The tsvector of a document: title/headings weight A, body weight D.
_TSV = "setweight(to_tsvector(s.config::regconfig, s.head), 'A') || setweight(to_tsvector(s.config::regconfig, s.body), 'D')"
_SRC_TEXT = (
    "SELECT s.document_id, s.collection_id, " + _TSV + " AS tsv"
    " FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[])"
    " AS s(document_id, collection_id, config, head, body)"
)
_SRC_TSV = (
    "SELECT s.document_id, s.collection_id, s.tsv"
    " FROM unnest(%s::bigint[], %s::bigint[], %s::tsvector[]) AS s(document_id, collection_id, tsv)"
)
_ANALYSE = ("SELECT (" + _TSV + ")::text FROM unnest(%s::text[], %s::text[], %s::text[])"
            " WITH ORDINALITY AS s(config, head, body, n) ORDER BY s.n")
_INSERT = """
WITH src AS ({src}), docs AS (
    INSERT INTO search_keyword_document (document_id, collection_id, length, tsv)
    SELECT document_id, collection_id,
           coalesce((SELECT sum(cardinality(u.positions)) FROM unnest(src.tsv) u), 0), tsv
    FROM src
    RETURNING document_id, collection_id, length, tsv
)
INSERT INTO search_keyword_posting (document_id, lexeme, collection_id, tf_title, tf_body, length)
SELECT d.document_id, u.lexeme, d.collection_id,
       cardinality(array_positions(u.weights, 'A')),
       cardinality(u.positions) - cardinality(array_positions(u.weights, 'A')),
       d.length
FROM docs d, unnest(d.tsv) u
"""
_INSERT_TEXT = _INSERT.format(src=_SRC_TEXT)
_INSERT_TSV = _INSERT.format(src=_SRC_TSV)


# Same definitions as search/migrations/0002_keyword_index.py (rebuilt after a bulk load).
_POSTING_INDEXES = (
    ("ALTER TABLE search_keyword_posting DROP CONSTRAINT search_keyword_posting_pkey",
     "ALTER TABLE search_keyword_posting ADD CONSTRAINT search_keyword_posting_pkey PRIMARY KEY (document_id, lexeme)"),
    ("DROP INDEX search_keyword_posting_lexeme",
     "CREATE INDEX search_keyword_posting_lexeme ON search_keyword_posting (lexeme)"
     " INCLUDE (document_id, collection_id, tf_title, tf_body, length)"),
)


class _NotEmpty(Exception):
    pass


def _begin_bulk(cursor, count: int) -> bool:
    """Drop the posting btrees when `count` documents go into an empty index; True if done."""
    if count < BULK_MIN:
        return False
    cursor.execute("SELECT n_documents FROM search_keyword_stats WHERE id = 1")
    row = cursor.fetchone()
    if row and row[0]:
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
    """(ids, collection ids, configurations, heads, bodies) of the active documents among `ids`."""
    cols: tuple[list, ...] = ([], [], [], [], [])
    rows = Document.objects.filter(id__in=ids, active=True).values_list(
        "id", "collection_id", "collection__text_search_config", "title", "content__body")
    for pk, coll, config, title, body in rows:
        head, rest = split_fields(title or "", body or "")
        for col, value in zip(cols, (pk, coll, config or "simple", prepare_text(head), prepare_text(rest))):
            col.append(value.replace("\x00", "") if isinstance(value, str) else value)
    return cols


class _Analyser:
    """Text analysis (to_tsvector) of the next batch on a second connection, in a thread.

    Stemming is the single largest cost of indexing; done by another backend it runs on
    the second core while this connection writes the previous batch. It reads no table,
    so it needs no snapshot of the writing transaction."""

    def __enter__(self):
        from concurrent.futures import ThreadPoolExecutor

        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pmd-tsvector")
        return self

    def submit(self, cols: tuple[list, ...]):
        return cols, self._pool.submit(self._analyse, cols[2], cols[3], cols[4])

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
            cursor.execute("DELETE FROM search_keyword_document WHERE document_id = ANY(%s)", [ids[start:start + BATCH * 4]])
        changed = sorted(set(changed_document_ids) - set(removed_document_ids))
        bulk = _begin_bulk(cursor, len(changed))
        batches = (_batch_columns(changed[start:start + BATCH]) for start in range(0, len(changed), BATCH))
        if len(changed) <= BATCH:
            for cols in batches:
                if cols[0]:
                    cursor.execute(_INSERT_TEXT, list(cols))
                    indexed += len(cols[0])
        else:
            with _Analyser() as analyser:
                pending = analyser.submit(next(batches))
                while pending is not None:
                    cols, future = pending
                    following = next(batches, None)  # read and prepared while batch `cols` is analysed
                    tsvs = future.result()
                    pending = analyser.submit(following) if following is not None else None
                    if cols[0]:
                        cursor.execute(_INSERT_TSV, [cols[0], cols[1], tsvs])
                        indexed += len(cols[0])
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
            cursor.execute("DELETE FROM search_keyword_document")
        else:
            cursor.execute("DELETE FROM search_keyword_document WHERE collection_id = ANY(%s)", [collection_ids])
    return keyword_index_update(changed_document_ids=ids, removed_document_ids=[])


def keyword_index_maintain() -> None:
    """VACUUM ANALYZE the index tables so scoring stays index-only after bulk changes.

    Only possible outside a transaction (autovacuum gets there later otherwise)."""
    if connection.in_atomic_block or not connection.get_autocommit():
        return
    with connection.cursor() as cursor:
        for table in ("search_keyword_posting", "search_keyword_document", "search_keyword_term"):
            cursor.execute(f"VACUUM (ANALYZE) {table}")
