"""Tables of the BM25 keyword index (see indexing/keyword/keyword_index.py for the design).

Plain SQL: the index is read and written only with SQL, and its consistency rules
(cascades from documents, document frequencies, collection statistics) live in the
database so that any way a document disappears keeps the statistics right.
"""

import django.db.models.deletion
from django.db import migrations, models

FORWARD = r"""
CREATE TABLE search_keyword_document (
    document_id   bigint PRIMARY KEY REFERENCES indexing_document(id) ON DELETE CASCADE,
    collection_id bigint NOT NULL,
    length        integer NOT NULL,
    tsv           tsvector NOT NULL
);
CREATE INDEX search_keyword_document_tsv ON search_keyword_document USING gin (tsv);

CREATE TABLE search_keyword_posting (
    document_id   bigint NOT NULL REFERENCES search_keyword_document(document_id) ON DELETE CASCADE,
    lexeme        text COLLATE "C" NOT NULL,
    collection_id bigint NOT NULL,
    tf_title      smallint NOT NULL,
    tf_body       smallint NOT NULL,
    length        integer NOT NULL,
    PRIMARY KEY (document_id, lexeme)
);
-- The scoring path: one index-only range scan per query lexeme.
CREATE INDEX search_keyword_posting_lexeme ON search_keyword_posting (lexeme)
    INCLUDE (document_id, collection_id, tf_title, tf_body, length);

CREATE TABLE search_keyword_term (
    lexeme text COLLATE "C" PRIMARY KEY,
    df     integer NOT NULL
);

CREATE TABLE search_keyword_stats (
    id           smallint PRIMARY KEY CHECK (id = 1),
    n_documents  bigint NOT NULL,
    total_length bigint NOT NULL
);
INSERT INTO search_keyword_stats VALUES (1, 0, 0);

CREATE FUNCTION search_keyword_posting_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_keyword_term AS t (lexeme, df)
    SELECT lexeme, count(*) FROM added GROUP BY lexeme ORDER BY lexeme
    ON CONFLICT (lexeme) DO UPDATE SET df = t.df + excluded.df;
    RETURN NULL;
END $$;

CREATE FUNCTION search_keyword_posting_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE search_keyword_term t SET df = t.df - r.n
    FROM (SELECT lexeme, count(*) AS n FROM removed GROUP BY lexeme ORDER BY lexeme) r
    WHERE t.lexeme = r.lexeme;
    DELETE FROM search_keyword_term t
    WHERE t.df <= 0 AND t.lexeme IN (SELECT lexeme FROM removed);
    RETURN NULL;
END $$;

CREATE TRIGGER search_keyword_posting_added AFTER INSERT ON search_keyword_posting
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION search_keyword_posting_added();
CREATE TRIGGER search_keyword_posting_removed AFTER DELETE ON search_keyword_posting
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION search_keyword_posting_removed();

CREATE FUNCTION search_keyword_document_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_keyword_stats AS s (id, n_documents, total_length)
    SELECT 1, count(*), coalesce(sum(length), 0) FROM added
    ON CONFLICT (id) DO UPDATE SET n_documents = s.n_documents + excluded.n_documents,
                                   total_length = s.total_length + excluded.total_length;
    RETURN NULL;
END $$;

CREATE FUNCTION search_keyword_document_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO search_keyword_stats AS s (id, n_documents, total_length)
    SELECT 1, -count(*), -coalesce(sum(length), 0) FROM removed
    ON CONFLICT (id) DO UPDATE SET n_documents = s.n_documents + excluded.n_documents,
                                   total_length = s.total_length + excluded.total_length;
    RETURN NULL;
END $$;

CREATE TRIGGER search_keyword_document_added AFTER INSERT ON search_keyword_document
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION search_keyword_document_added();
CREATE TRIGGER search_keyword_document_removed AFTER DELETE ON search_keyword_document
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION search_keyword_document_removed();
"""

BACKWARD = r"""
DROP TABLE IF EXISTS search_keyword_posting;
DROP TABLE IF EXISTS search_keyword_document;
DROP TABLE IF EXISTS search_keyword_term;
DROP TABLE IF EXISTS search_keyword_stats;
DROP FUNCTION IF EXISTS search_keyword_posting_added();
DROP FUNCTION IF EXISTS search_keyword_posting_removed();
DROP FUNCTION IF EXISTS search_keyword_document_added();
DROP FUNCTION IF EXISTS search_keyword_document_removed();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("indexing", "0001_initial"),
        ("search", "0001_apitoken"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(FORWARD, BACKWARD)],
            state_operations=[
                migrations.CreateModel(
                    name="KeywordDocument",
                    fields=[
                        (
                            "document",
                            models.OneToOneField(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                primary_key=True,
                                related_name="+",
                                serialize=False,
                                to="indexing.document",
                            ),
                        ),
                        ("collection_id", models.BigIntegerField()),
                        ("length", models.IntegerField()),
                        ("tsv", models.TextField()),
                    ],
                    options={"db_table": "search_keyword_document"},
                ),
                migrations.CreateModel(
                    name="KeywordTerm",
                    fields=[
                        ("lexeme", models.TextField(primary_key=True, serialize=False)),
                        ("df", models.IntegerField()),
                    ],
                    options={"db_table": "search_keyword_term"},
                ),
                migrations.CreateModel(
                    name="KeywordStats",
                    fields=[
                        ("id", models.SmallIntegerField(primary_key=True, serialize=False)),
                        ("n_documents", models.BigIntegerField()),
                        ("total_length", models.BigIntegerField()),
                    ],
                    options={"db_table": "search_keyword_stats"},
                ),
                migrations.CreateModel(
                    name="KeywordPosting",
                    fields=[
                        (
                            "pk",
                            models.CompositePrimaryKey(
                                "document_id", "lexeme", blank=True, editable=False, primary_key=True, serialize=False
                            ),
                        ),
                        (
                            "document",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="search.keyworddocument",
                            ),
                        ),
                        ("lexeme", models.TextField()),
                        ("collection_id", models.BigIntegerField()),
                        ("tf_title", models.SmallIntegerField()),
                        ("tf_body", models.SmallIntegerField()),
                        ("length", models.IntegerField()),
                    ],
                    options={"db_table": "search_keyword_posting"},
                ),
            ],
        ),
    ]
