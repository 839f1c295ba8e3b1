"""The BM25 keyword index's tables (indexing/keyword/keyword_index.py).

The tables are created by SQL in migration 0005 (passages cascade from documents in the
database, triggers keep the per-collection statistics). These models only describe them so
Django's test flush and admin know they exist; the index is read and written with SQL,
never through the ORM. Their table names are the search app's, which created them.
"""

from __future__ import annotations

from django.db import models


class KeywordPassage(models.Model):
    """A section (or a piece of a long one) of an active document, as the keyword index scores it."""

    id = models.BigAutoField(primary_key=True)
    document = models.ForeignKey(
        "indexing.Document", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    collection_id = models.BigIntegerField()
    ordinal = models.IntegerField()
    start_line = models.IntegerField()  # first line, 1-based
    end_line = models.IntegerField()  # last line, inclusive
    start_char = models.IntegerField()  # [start_char, end_char) of the body
    end_char = models.IntegerField()
    length = models.IntegerField()  # tokens (stop words excluded)
    tsv = models.TextField()

    class Meta:
        db_table = "search_keyword_passage"


class KeywordPosting(models.Model):
    pk = models.CompositePrimaryKey("passage_id", "lexeme")
    passage = models.ForeignKey(KeywordPassage, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    lexeme = models.TextField()
    collection_id = models.BigIntegerField()
    document_id = models.BigIntegerField()
    tf_title = models.SmallIntegerField()
    tf_body = models.SmallIntegerField()
    length = models.IntegerField()

    class Meta:
        db_table = "search_keyword_posting"


class KeywordTerm(models.Model):
    """Passages of one collection holding a lexeme (BM25's document frequency, per collection)."""

    pk = models.CompositePrimaryKey("lexeme", "collection_id")
    lexeme = models.TextField()
    collection_id = models.BigIntegerField()
    df = models.IntegerField()

    class Meta:
        db_table = "search_keyword_term"


class KeywordStats(models.Model):
    """Per collection: passages, documents and total passage length (BM25's N and average length)."""

    collection_id = models.BigIntegerField(primary_key=True)
    n_passages = models.BigIntegerField()
    n_documents = models.BigIntegerField()
    total_length = models.BigIntegerField()

    class Meta:
        db_table = "search_keyword_stats"
