"""The keyword index holds passages, and its statistics are kept per collection.

Replaces the document-level tables of 0002/0003:

- `search_keyword_passage`: one row per passage of an active document (a markdown section,
  or a piece of a long one; see indexing/keyword/keyword_index.py): its document, collection,
  ordinal, line range and character range in the body, length in tokens and a weighted
  tsvector (document title + the section's heading weight A, the rest weight D) behind a
  GIN index for required phrases and exclusions. Rows cascade from `indexing_document`.
- `search_keyword_posting`: per (passage, lexeme) the term frequencies in title and body,
  with the passage length, document and collection, all in a btree on (lexeme,
  collection), so scoring a query term in the searched collections is one index-only
  range scan. Postings follow their passage through a statement-level delete trigger.
- `search_keyword_term` (lexeme, collection) → number of passages holding the lexeme, and
  `search_keyword_stats` collection → passages, documents, total length: BM25's statistics
  per collection, summed over the searched collections at query time, so a collection
  scores the same whatever else is indexed. Kept by statement-level triggers on the two
  tables above, so every way a document disappears keeps them right.

The old tables are dropped and the index is rebuilt for every active document.
"""

import django.db.models.deletion
from django.db import migrations, models

DROP_OLD = r"""
DROP TABLE IF EXISTS search_keyword_posting;
DROP TABLE IF EXISTS search_keyword_document;
DROP TABLE IF EXISTS search_keyword_term;
DROP TABLE IF EXISTS search_keyword_stats;
DROP FUNCTION IF EXISTS search_keyword_posting_added();
DROP FUNCTION IF EXISTS search_keyword_posting_removed();
DROP FUNCTION IF EXISTS search_keyword_document_added();
DROP FUNCTION IF EXISTS search_keyword_document_removed();
DROP FUNCTION IF EXISTS search_keyword_document_postings_removed();
"""

FORWARD = (
    DROP_OLD
    + r"""
CREATE TABLE search_keyword_passage (
    id            bigserial PRIMARY KEY,
    document_id   bigint NOT NULL REFERENCES indexing_document(id) ON DELETE CASCADE,
    collection_id bigint NOT NULL,
    ordinal       integer NOT NULL,
    start_line    integer NOT NULL,
    end_line      integer NOT NULL,
    start_char    integer NOT NULL,
    end_char      integer NOT NULL,
    length        integer NOT NULL,
    tsv           tsvector NOT NULL,
    UNIQUE (document_id, ordinal)
);
CREATE INDEX search_keyword_passage_tsv ON search_keyword_passage USING gin (tsv);

CREATE TABLE search_keyword_posting (
    passage_id    bigint NOT NULL,
    lexeme        text COLLATE "C" NOT NULL,
    collection_id bigint NOT NULL,
    document_id   bigint NOT NULL,
    tf_title      smallint NOT NULL,
    tf_body       smallint NOT NULL,
    length        integer NOT NULL,
    PRIMARY KEY (passage_id, lexeme)
);
-- The scoring path: one index-only range scan per query lexeme and searched collections.
CREATE INDEX search_keyword_posting_lexeme ON search_keyword_posting (lexeme, collection_id)
    INCLUDE (document_id, passage_id, tf_title, tf_body, length);

CREATE TABLE search_keyword_term (
    lexeme        text COLLATE "C" NOT NULL,
    collection_id bigint NOT NULL,
    df            integer NOT NULL,
    PRIMARY KEY (lexeme, collection_id)
);

CREATE TABLE search_keyword_stats (
    collection_id bigint PRIMARY KEY,
    n_passages    bigint NOT NULL,
    n_documents   bigint NOT NULL,
    total_length  bigint NOT NULL
);

CREATE FUNCTION search_keyword_posting_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_keyword_term AS t (lexeme, collection_id, df)
    SELECT lexeme, collection_id, count(*) FROM added GROUP BY lexeme, collection_id ORDER BY lexeme, collection_id
    ON CONFLICT (lexeme, collection_id) DO UPDATE SET df = t.df + excluded.df;
    RETURN NULL;
END $$;

CREATE FUNCTION search_keyword_posting_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH r AS MATERIALIZED (SELECT lexeme, collection_id, count(*) AS n FROM removed
                            GROUP BY lexeme, collection_id ORDER BY lexeme, collection_id),
    gone AS (DELETE FROM search_keyword_term t USING r
             WHERE t.lexeme = r.lexeme AND t.collection_id = r.collection_id AND t.df <= r.n)
    UPDATE search_keyword_term t SET df = t.df - r.n FROM r
    WHERE t.lexeme = r.lexeme AND t.collection_id = r.collection_id AND t.df > r.n;
    RETURN NULL;
END $$;

CREATE TRIGGER search_keyword_posting_added AFTER INSERT ON search_keyword_posting
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION search_keyword_posting_added();
CREATE TRIGGER search_keyword_posting_removed AFTER DELETE ON search_keyword_posting
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION search_keyword_posting_removed();

CREATE FUNCTION search_keyword_passage_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_keyword_stats AS s (collection_id, n_passages, n_documents, total_length)
    SELECT collection_id, count(*), count(*) FILTER (WHERE ordinal = 0), coalesce(sum(length), 0)
    FROM added GROUP BY collection_id ORDER BY collection_id
    ON CONFLICT (collection_id) DO UPDATE SET n_passages = s.n_passages + excluded.n_passages,
                                              n_documents = s.n_documents + excluded.n_documents,
                                              total_length = s.total_length + excluded.total_length;
    RETURN NULL;
END $$;

CREATE FUNCTION search_keyword_passage_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- An array, not a join: the primary key (passage_id, lexeme) serves one document as
    -- well as a whole collection.
    DELETE FROM search_keyword_posting WHERE passage_id = ANY (ARRAY(SELECT id FROM removed));
    WITH r AS MATERIALIZED (SELECT collection_id, count(*) AS n, count(*) FILTER (WHERE ordinal = 0) AS d,
                                   coalesce(sum(length), 0) AS l
                            FROM removed GROUP BY collection_id ORDER BY collection_id),
    gone AS (DELETE FROM search_keyword_stats s USING r
             WHERE s.collection_id = r.collection_id AND s.n_passages <= r.n)
    UPDATE search_keyword_stats s SET n_passages = s.n_passages - r.n, n_documents = s.n_documents - r.d,
                                      total_length = s.total_length - r.l
    FROM r WHERE s.collection_id = r.collection_id AND s.n_passages > r.n;
    RETURN NULL;
END $$;

CREATE TRIGGER search_keyword_passage_added AFTER INSERT ON search_keyword_passage
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION search_keyword_passage_added();
CREATE TRIGGER search_keyword_passage_removed AFTER DELETE ON search_keyword_passage
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION search_keyword_passage_removed();
"""
)

BACKWARD = r"""
DROP TABLE IF EXISTS search_keyword_posting;
DROP TABLE IF EXISTS search_keyword_passage;
DROP TABLE IF EXISTS search_keyword_term;
DROP TABLE IF EXISTS search_keyword_stats;
DROP FUNCTION IF EXISTS search_keyword_posting_added();
DROP FUNCTION IF EXISTS search_keyword_posting_removed();
DROP FUNCTION IF EXISTS search_keyword_passage_added();
DROP FUNCTION IF EXISTS search_keyword_passage_removed();
"""


def rebuild(apps, schema_editor):
    """Index every active document again, as passages (the real writer, not a historical copy)."""
    from indexing.keyword.keyword_index import keyword_index_rebuild  # noqa: PLC0415 - a migration is history: today's code loads only when this step runs

    keyword_index_rebuild()


class Migration(migrations.Migration):
    dependencies = [
        ("indexing", "0003_job_created_by"),  # the rebuild reads documents through today's models
        ("search", "0004_token_failure"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.DeleteModel(name="KeywordPosting"),
                migrations.DeleteModel(name="KeywordDocument"),
                migrations.DeleteModel(name="KeywordTerm"),
                migrations.DeleteModel(name="KeywordStats"),
                migrations.CreateModel(
                    name="KeywordPassage",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        (
                            "document",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="indexing.document",
                            ),
                        ),
                        ("collection_id", models.BigIntegerField()),
                        ("ordinal", models.IntegerField()),
                        ("start_line", models.IntegerField()),
                        ("end_line", models.IntegerField()),
                        ("start_char", models.IntegerField()),
                        ("end_char", models.IntegerField()),
                        ("length", models.IntegerField()),
                        ("tsv", models.TextField()),
                    ],
                    options={"db_table": "search_keyword_passage"},
                ),
                migrations.CreateModel(
                    name="KeywordPosting",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "passage_id", "lexeme", blank=True, editable=False, primary_key=True, serialize=False
                            ),
                        ),
                        (
                            "passage",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="search.keywordpassage",
                            ),
                        ),
                        ("lexeme", models.TextField()),
                        ("collection_id", models.BigIntegerField()),
                        ("document_id", models.BigIntegerField()),
                        ("tf_title", models.SmallIntegerField()),
                        ("tf_body", models.SmallIntegerField()),
                        ("length", models.IntegerField()),
                    ],
                    options={"db_table": "search_keyword_posting"},
                ),
                migrations.CreateModel(
                    name="KeywordTerm",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "lexeme", "collection_id", blank=True, editable=False, primary_key=True, serialize=False
                            ),
                        ),
                        ("lexeme", models.TextField()),
                        ("collection_id", models.BigIntegerField()),
                        ("df", models.IntegerField()),
                    ],
                    options={"db_table": "search_keyword_term"},
                ),
                migrations.CreateModel(
                    name="KeywordStats",
                    fields=[
                        ("collection_id", models.BigIntegerField(primary_key=True, serialize=False)),
                        ("n_passages", models.BigIntegerField()),
                        ("n_documents", models.BigIntegerField()),
                        ("total_length", models.BigIntegerField()),
                    ],
                    options={"db_table": "search_keyword_stats"},
                ),
            ],
        ),
        migrations.RunPython(rebuild, migrations.RunPython.noop),
    ]
