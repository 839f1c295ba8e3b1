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

    class Meta:
        ordering = ["-created"]
        verbose_name = "API token"

    def __str__(self) -> str:
        label = f"{self.prefix}… {self.name}".strip()
        return f"{label} ({self.user}){' revoked' if self.revoked else ''}"

    @property
    def active(self) -> bool:
        return self.revoked is None


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
# The tables are created by SQL in migration 0002 (foreign keys cascade in the database,
# triggers keep statistics). These models only describe them so Django's test flush and
# admin know they exist; the index is read and written with SQL, never through the ORM.

class KeywordDocument(models.Model):
    document = models.OneToOneField("indexing.Document", primary_key=True, on_delete=models.DO_NOTHING,
                                    db_constraint=False, related_name="+")
    collection_id = models.BigIntegerField()
    length = models.IntegerField()
    tsv = models.TextField()

    class Meta:
        db_table = "search_keyword_document"


class KeywordPosting(models.Model):
    pk = models.CompositePrimaryKey("document_id", "lexeme")
    document = models.ForeignKey(KeywordDocument, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    lexeme = models.TextField()
    collection_id = models.BigIntegerField()
    tf_title = models.SmallIntegerField()
    tf_body = models.SmallIntegerField()
    length = models.IntegerField()

    class Meta:
        db_table = "search_keyword_posting"


class KeywordTerm(models.Model):
    lexeme = models.TextField(primary_key=True)
    df = models.IntegerField()

    class Meta:
        db_table = "search_keyword_term"


class KeywordStats(models.Model):
    id = models.SmallIntegerField(primary_key=True)
    n_documents = models.BigIntegerField()
    total_length = models.BigIntegerField()

    class Meta:
        db_table = "search_keyword_stats"
