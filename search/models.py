"""Search-side models: API tokens for the JSON API and the MCP endpoint."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A per-user bearer token. Only its SHA-256 digest is stored; the raw value is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, default="")
    digest = models.CharField(max_length=64, unique=True, editable=False, help_text="sha256 of the token")
    prefix = models.CharField(max_length=16, editable=False, help_text="first characters, to recognise a token")
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True, editable=False)
    revoked = models.DateTimeField(null=True, blank=True)
    can_write = models.BooleanField(default=False, help_text="may change things its user may change; "
                                    "read-only otherwise")
    collections = models.ManyToManyField("indexing.Collection", blank=True, related_name="+",
                                         help_text="limited to these (of those its user may see); none: all of them")
    expires = models.DateTimeField(null=True, blank=True, help_text="refused after this time; empty: never")

    class Meta:
        ordering = ["-created"]
        verbose_name = "API token"

    def __str__(self) -> str:
        label = f"{self.prefix}… {self.name}".strip()
        return f"{label} ({self.user}){' revoked' if self.revoked else ''}"

    @property
    def active(self) -> bool:
        return self.revoked is None and not self.expired

    @property
    def expired(self) -> bool:
        from django.utils import timezone

        return self.expires is not None and self.expires <= timezone.now()


class TokenFailure(models.Model):
    """Failed bearer-token attempts from one client address (API and MCP), for search.throttling.

    In the database, not a per-process cache, so every web worker sees the same count.
    """

    address = models.CharField(max_length=64, unique=True)
    failures = models.PositiveIntegerField(default=0)
    window_start = models.DateTimeField(help_text="first failure of the current counting window")
    blocked_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API token failure"

    def __str__(self) -> str:
        return f"{self.address or 'unknown address'}: {self.failures} failures"


# --- BM25 keyword index (search/index/keyword_index.py) -------------------------------------
# The tables are created by SQL in migration 0005 (passages cascade from documents in the
# database, triggers keep the per-collection statistics). These models only describe them so
# Django's test flush and admin know they exist; the index is read and written with SQL,
# never through the ORM.

class KeywordPassage(models.Model):
    """A section (or a piece of a long one) of an active document, as the keyword index scores it."""

    id = models.BigAutoField(primary_key=True)
    document = models.ForeignKey("indexing.Document", on_delete=models.DO_NOTHING, db_constraint=False,
                                 related_name="+")
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
