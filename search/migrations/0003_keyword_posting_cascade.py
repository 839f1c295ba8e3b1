"""Postings follow their keyword document through one statement-level trigger.

The row-level foreign key from search_keyword_posting to search_keyword_document cost
one referential check per posting (about half a million for 5k documents, roughly a
third of a first index). A statement-level AFTER DELETE trigger on the documents keeps
the same rule (a removed document takes its postings, and through the posting trigger
its document frequencies, whoever deletes it) with one set-based DELETE per statement.
Postings are only written by search.index.keyword_index together with their document.
"""

from django.db import migrations

FORWARD = r"""
ALTER TABLE search_keyword_posting DROP CONSTRAINT IF EXISTS search_keyword_posting_document_id_fkey;

CREATE FUNCTION search_keyword_document_postings_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- An array, not a join: cascades delete one document per statement, and the
    -- primary key (document_id, lexeme) must serve both that and whole collections.
    DELETE FROM search_keyword_posting WHERE document_id = ANY (ARRAY(SELECT document_id FROM removed));
    RETURN NULL;
END $$;

-- Document frequencies of removed postings: group once, delete the terms that reach zero
-- and decrement the others by joins on the term key (the IN form of 0002 planned as a
-- nested loop over every removed row when a whole collection goes at once).
CREATE OR REPLACE FUNCTION search_keyword_posting_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    WITH r AS MATERIALIZED (SELECT lexeme, count(*) AS n FROM removed GROUP BY lexeme ORDER BY lexeme),
    gone AS (DELETE FROM search_keyword_term t USING r WHERE t.lexeme = r.lexeme AND t.df <= r.n)
    UPDATE search_keyword_term t SET df = t.df - r.n FROM r WHERE t.lexeme = r.lexeme AND t.df > r.n;
    RETURN NULL;
END $$;

CREATE TRIGGER search_keyword_document_postings_removed AFTER DELETE ON search_keyword_document
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT
    EXECUTE FUNCTION search_keyword_document_postings_removed();
"""

BACKWARD = r"""
CREATE OR REPLACE FUNCTION search_keyword_posting_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE search_keyword_term t SET df = t.df - r.n
    FROM (SELECT lexeme, count(*) AS n FROM removed GROUP BY lexeme ORDER BY lexeme) r
    WHERE t.lexeme = r.lexeme;
    DELETE FROM search_keyword_term t
    WHERE t.df <= 0 AND t.lexeme IN (SELECT lexeme FROM removed);
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS search_keyword_document_postings_removed ON search_keyword_document;
DROP FUNCTION IF EXISTS search_keyword_document_postings_removed();
DELETE FROM search_keyword_posting p
    WHERE NOT EXISTS (SELECT 1 FROM search_keyword_document d WHERE d.document_id = p.document_id);
ALTER TABLE search_keyword_posting ADD CONSTRAINT search_keyword_posting_document_id_fkey
    FOREIGN KEY (document_id) REFERENCES search_keyword_document(document_id) ON DELETE CASCADE;
"""


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0002_keyword_index"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
