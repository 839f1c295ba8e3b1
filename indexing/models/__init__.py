"""What pmd knows about the files it indexes.

Content is addressed by the SHA-256 of its text, so identical files share one body
(and, later, one set of chunks and embeddings). A Document is a path inside a
Collection pointing at the content it currently has.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from pgvector.django import VectorField


class Collection(models.Model):
    class Visibility(models.TextChoices):
        """Who may see a collection (indexing.access decides it, in every query)."""

        EVERYONE = "everyone", "everyone signed in"
        SHARED = "shared", "chosen groups and people"
        PRIVATE = "private", "only its owner"

    class TitleFrom(models.TextChoices):
        """Where a note's title comes from (indexing.text.extract_title)."""

        HEADING = "heading", "frontmatter title, else the first level-1 heading, else the file name"
        FILENAME = "filename", "the file name (Obsidian's convention)"

    name = models.CharField(max_length=200, unique=True)
    root_path = models.CharField(max_length=4096)
    mask = models.CharField(max_length=500, default="**/*.md")
    ignore_patterns = models.JSONField(default=list, blank=True)
    text_search_config = models.CharField(
        max_length=63, default="english",
        help_text="PostgreSQL text search configuration for stemming and stop words (english, simple, ...).",
    )
    title_from = models.CharField(
        max_length=10, choices=TitleFrom.choices, default=TitleFrom.HEADING,
        help_text="where notes' titles come from; 'filename' is chosen for a folder holding .obsidian/",
    )
    transclude = models.BooleanField(
        default=False,
        help_text="a note that embeds another (![[Note#Section]]) is found by the embedded words too",
    )
    # How the stored titles, tags and links were read (indexing.text.note_reading): when it is not
    # how this pmd reads them, the next scan reads every note again, changed or not.
    reading = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    last_indexed_at = models.DateTimeField(null=True, blank=True)
    visibility = models.CharField(max_length=10, choices=Visibility.choices, default=Visibility.EVERYONE)
    # Who added it from the web UI, API or admin (none from the CLI): the owner always sees it.
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="owned_collections")
    shared_users = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="shared_collections",
                                          help_text="people who see it when shared with chosen groups and people")
    shared_groups = models.ManyToManyField("auth.Group", blank=True, related_name="shared_collections",
                                           help_text="groups whose members see it when shared with chosen groups")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def uri(self) -> str:
        return f"pmd://{self.name}/"


class Content(models.Model):
    hash = models.CharField(max_length=64, primary_key=True)
    body = models.TextField()
    size = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "content"

    def __str__(self) -> str:
        return self.hash[:12]


class Document(models.Model):
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="documents")
    path = models.CharField(max_length=4096, help_text="Relative to the collection root, with '/' separators.")
    title = models.CharField(max_length=1000, blank=True)
    content = models.ForeignKey(Content, on_delete=models.PROTECT, related_name="documents", db_column="content_hash")
    docid = models.CharField(max_length=6, db_index=True, help_text="First 6 hex digits of the content hash.")
    active = models.BooleanField(default=True)
    mtime = models.FloatField(default=0)
    size = models.PositiveBigIntegerField(default=0)
    frontmatter = models.JSONField(default=dict, blank=True)
    # The note's own structure (indexing.structure), kept for filters, facets and sorting:
    # tags from frontmatter and inline #tags (lower case, no '#'), and the note's date with where
    # it came from ("frontmatter:date", "frontmatter:created", "filename" or "mtime").
    tags = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    # What `tag:` filters match: every tag and each parent of a nested one (`project/x` also as
    # `project`, the way Obsidian nests tags), computed by PostgreSQL (migration 0007) so every
    # writer of `tags` keeps it right; facets and the document view show `tags` as written.
    tags_with_parents = models.GeneratedField(
        expression=models.Func(models.F("tags"), function="pmd_tags_with_parents",
                               output_field=ArrayField(models.CharField(max_length=200))),
        output_field=ArrayField(models.CharField(max_length=200)), db_persist=True,
    )
    note_date = models.DateTimeField(null=True, blank=True)
    date_source = models.CharField(max_length=40, blank=True, default="")
    # The converted text (Extraction) a PDF, DOCX… was read from; "" for markdown. An extraction no
    # active document names any more is deleted (extractions_prune).
    extraction_key = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["collection", "path"], name="document_unique_path"),
        ]
        indexes = [
            models.Index(fields=["collection", "active"]),
            GinIndex(fields=["tags"], name="document_tags_gin"),
            GinIndex(fields=["tags_with_parents"], name="document_tag_parents_gin"),
            GinIndex(fields=["frontmatter"], name="document_frontmatter_gin", opclasses=["jsonb_path_ops"]),
            models.Index(fields=["note_date"], name="document_note_date"),
            # path:folder/** filters: `path LIKE 'folder/%'` through it, whatever the collation
            models.Index(fields=["path"], name="document_path_prefix", opclasses=["varchar_pattern_ops"]),
            models.Index(fields=["extraction_key"], name="document_extraction_key",
                         condition=~models.Q(extraction_key="")),
        ]
        ordering = ["collection_id", "path"]

    def __str__(self) -> str:
        return self.uri

    @property
    def uri(self) -> str:
        return f"pmd://{self.collection.name}/{self.path}"

    @property
    def file_type(self) -> str:
        """markdown, pdf, docx, pptx, xlsx, html, epub or text: what the path's extension is read as."""
        from indexing.convert import format_of

        return format_of(self.path)


class PathContext(models.Model):
    """Text describing a part of the knowledge base, inherited by everything below it.

    collection NULL with prefix "" is the global context (`/`); a collection with
    prefix "" is that collection's root context; otherwise a path prefix inside it.
    """

    collection = models.ForeignKey(
        Collection, null=True, blank=True, on_delete=models.CASCADE, related_name="contexts"
    )
    path_prefix = models.CharField(max_length=4096, blank=True, default="")
    text = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["collection", "path_prefix"], name="context_unique_prefix",
                nulls_distinct=False,
            ),
        ]
        ordering = ["collection_id", "path_prefix"]

    def __str__(self) -> str:
        return self.target

    @property
    def target(self) -> str:
        if self.collection_id is None:
            return "/"
        return f"pmd://{self.collection.name}/{self.path_prefix}"


class DocumentLink(models.Model):
    """A link written in a note: `[[Note]]`, `[[Note|text]]`, `[[Note#Heading]]`, `![[embed]]` or a
    markdown link to a .md file. `target` is the note it resolves to inside the same collection
    (by path, file name, title or alias), NULL while nothing matches (a problem of the source)."""

    class Kind(models.TextChoices):
        WIKILINK = "wikilink"
        EMBED = "embed"
        MARKDOWN = "markdown"

    source = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="links_out")
    target = models.ForeignKey(Document, null=True, blank=True, on_delete=models.SET_NULL, related_name="links_in")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    target_text = models.CharField(max_length=1000, help_text="what the link names, as written")
    heading = models.CharField(max_length=500, blank=True, default="")
    shown_text = models.CharField(max_length=500, blank=True, default="")
    line = models.PositiveIntegerField(default=1)
    context = models.TextField(blank=True, default="", help_text="the sentence around the link")

    class Meta:
        indexes = [models.Index(fields=["target"]), models.Index(fields=["source"])]
        ordering = ["source_id", "line", "id"]

    def __str__(self) -> str:
        return f"{self.source_id} → {self.target_text}"


class LLMCache(models.Model):
    key = models.CharField(max_length=64, primary_key=True)
    kind = models.CharField(max_length=32, default="", blank=True)
    value = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "LLM cache entry"
        verbose_name_plural = "LLM cache"


class Extraction(models.Model):
    """The text a converter made of a file's bytes (indexing/convert), by their SHA-256, the format
    and the converter's version: a file touched but unchanged, renamed or copied into another
    collection is never converted twice. A file the converter refused keeps its reason here, so a
    file that hangs the converter costs its time limit once, not at every scan."""

    key = models.CharField(max_length=100, primary_key=True)  # sha256:format:version
    text = models.TextField(blank=True)
    units = models.PositiveIntegerField(default=0)  # pages, slides, sheets or chapters read
    warnings = models.JSONField(default=list, blank=True)
    refused = models.TextField(blank=True)  # why it could not be read; "" when it was
    seconds = models.FloatField(default=0)  # how long the conversion took
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.key


class FileProblem(models.Model):
    """A file the last scan of its collection could not index cleanly."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="problems")
    path = models.CharField(max_length=4096)
    severity = models.CharField(max_length=10, choices=[("warning", "warning"), ("error", "error")])
    message = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["collection_id", "path"]


class Job(models.Model):
    """Progress of long work (indexing, embedding) that the CLI, web UI and API follow."""

    class Kind(models.TextChoices):
        INDEX = "index"
        EMBED = "embed"
        UPDATE = "update"

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=20, choices=Kind.choices)
    collection = models.ForeignKey(Collection, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs")
    state = models.CharField(max_length=10, choices=State.choices, default=State.QUEUED)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True, default="")
    result = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Who started it from the web UI or API: members see only their own jobs. Jobs of the CLI,
    # the watcher and periodic tasks have none, so only staff see them.
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    # The process working on it (set when one takes it, kept fresh while it works): a job whose
    # process is gone (killed, out of memory) is recovered instead of staying `running`.
    worker_host = models.CharField(max_length=255, blank=True, default="")
    worker_pid = models.PositiveIntegerField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    @property
    def percent(self) -> int:
        if self.state == self.State.DONE:
            return 100
        return int(100 * self.done / self.total) if self.total else 0

    @property
    def finished(self) -> bool:
        return self.state in {self.State.DONE, self.State.FAILED}


# --- Embeddings ------------------------------------------------------------------------
# Vectors are only comparable when they come from the same model, with the same
# chunking and document prompt: an EmbeddingFingerprint records one such setup.
# Chunks hang off Content (one set per content hash, shared by identical files),
# per fingerprint. The vector column is untyped (`vector`, any dimension) so
# that switching models needs no schema change; each fingerprint gets its own
# partial HNSW index on `(embedding::vector(dims))` (see indexing/services/embedding/).


class EmbeddingFingerprint(models.Model):
    key = models.CharField(max_length=32, unique=True, help_text="hash of model, dims, chunking and document prompt")
    model = models.CharField(max_length=300)
    dims = models.PositiveIntegerField()
    backend = models.CharField(max_length=20, default="ollama")
    chunk_params = models.JSONField(default=dict)
    document_prompt = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-last_used_at"]

    def __str__(self) -> str:
        return f"{self.model} ({self.dims}d, {self.chunk_params.get('max_tokens', '?')} tokens/chunk)"

    @property
    def hnsw_index_name(self) -> str:
        return f"indexing_chunk_hnsw_{self.pk}"


class Chunk(models.Model):
    fingerprint = models.ForeignKey(EmbeddingFingerprint, on_delete=models.CASCADE, related_name="chunks")
    content = models.ForeignKey(Content, on_delete=models.CASCADE, related_name="chunks", db_column="content_hash")
    seq = models.PositiveIntegerField()
    char_start = models.PositiveIntegerField()
    char_end = models.PositiveIntegerField()
    start_line = models.PositiveIntegerField(default=1)
    tokens = models.PositiveIntegerField(default=0)
    embedding = VectorField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["fingerprint", "content", "seq"], name="chunk_unique_seq"),
        ]

    def __str__(self) -> str:
        return f"{self.content_id[:12]}#{self.seq}"


class ContentEmbedding(models.Model):
    """A content whose chunks are all embedded under a fingerprint (written last)."""

    fingerprint = models.ForeignKey(EmbeddingFingerprint, on_delete=models.CASCADE, related_name="contents")
    content = models.ForeignKey(Content, on_delete=models.CASCADE, related_name="embeddings", db_column="content_hash")
    chunks = models.PositiveIntegerField(default=0)
    embedded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["fingerprint", "content"], name="content_embedding_unique"),
        ]


class AuditEvent(models.Model):
    """A change that matters for who sees what: collections, sharing, tokens, contexts, groups."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    # Kept as text so the trail survives the user's deletion: "alice", "alice (token pmd_ab12cd)",
    # "local user root" for the CLI.
    actor_label = models.CharField(max_length=200)
    action = models.CharField(max_length=50, db_index=True)
    target = models.CharField(max_length=300, blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.actor_label} {self.action} {self.target}"


class AnswerQuerySet(models.QuerySet):
    def of_conversation(self, conversation):
        """The answers of one conversation; none when `conversation` (as a client wrote it) is no
        conversation id at all, as for one that does not exist."""
        try:
            conversation = uuid.UUID(str(conversation))
        except ValueError:
            return self.none()
        return self.filter(conversation=conversation)


class Answer(models.Model):
    """One asked question and its answer (search.pipeline.answer): what the asker sees again, the
    follow-ups of a conversation build on, and the cost staff add up per model."""

    class State(models.TextChoices):
        ANSWERED = "answered"
        REFUSED = "refused", "not covered by the notes"
        CANCELLED = "cancelled"
        CUT_SHORT = "cut_short", "stopped at the deadline"
        FAILED = "failed"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="answers", help_text="empty: the local user (CLI)")
    conversation = models.UUIDField(default=uuid.uuid4, db_index=True,
                                    help_text="answers sharing it are one conversation: follow-ups")
    question = models.TextField()
    text = models.TextField(blank=True, default="", help_text="the answer, citations checked")
    state = models.CharField(max_length=10, choices=State.choices, default=State.ANSWERED)
    model = models.CharField(max_length=300, blank=True, default="")
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    passages = models.JSONField(default=list, blank=True, help_text="the passages given: uri, line, title, tokens")
    cited = models.JSONField(default=list, blank=True, help_text="passage numbers the answer cites")
    flags = models.JSONField(default=list, blank=True, help_text="what the citation check found")
    retrieval_ms = models.FloatField(default=0)
    first_token_ms = models.FloatField(null=True, blank=True)
    total_ms = models.FloatField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = AnswerQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "created_at"], name="answer_user_time")]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.question[:60]}"


# --- History: the git commits of collections that are repositories -------------------------
# A collection whose folder lies inside a git work tree has its current branch's history
# indexed (indexing/services/history.py): one Commit per commit reachable from HEAD that touches
# the folder. Each commit's searchable text is a Content row, so its chunks and vectors come
# from the same embedding worker and backends as the notes' (pending.py asks for both).


class CollectionHistory(models.Model):
    """Where a collection's history indexing stands: the HEAD indexed, and why not when it is not."""

    class State(models.TextChoices):
        INDEXED = "indexed"
        NOT_REPOSITORY = "not_repository", "not in a git repository"
        EMPTY = "empty", "repository without commits"
        FAILED = "failed"

    collection = models.OneToOneField(Collection, on_delete=models.CASCADE, related_name="history")
    state = models.CharField(max_length=20, choices=State.choices, default=State.NOT_REPOSITORY)
    message = models.TextField(blank=True, default="")
    repository = models.CharField(max_length=4096, blank=True, default="", help_text="top of the git work tree")
    branch = models.CharField(max_length=500, blank=True, default="")
    head = models.CharField(max_length=64, blank=True, default="", help_text="the HEAD last indexed")
    shallow = models.BooleanField(default=False)
    capped = models.BooleanField(default=False, help_text="only the newest PMD_HISTORY_MAX_COMMITS are indexed")
    settings_key = models.CharField(max_length=64, blank=True, default="",
                                    help_text="the history settings the stored commits were made with")
    commits = models.PositiveIntegerField(default=0)
    indexed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "collection histories"


class Commit(models.Model):
    """One commit of a collection's repository, as history search finds it."""

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="commits")
    sha = models.CharField(max_length=64)
    parents = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    title = models.CharField(max_length=1000, blank=True)
    message = models.TextField(blank=True, default="", help_text="the whole message, title included")
    author_name = models.CharField(max_length=500, blank=True, default="")
    author_email = models.CharField(max_length=500, blank=True, default="")
    committed_at = models.DateTimeField()
    # [{"status": "A|M|D|R|C|T", "path": ..., "old_path": ...}], paths relative to the collection
    changes = models.JSONField(default=list, blank=True)
    paths = ArrayField(models.TextField(), default=list, blank=True,
                       help_text="every path the commit touched, old names of renames too (path filters)")
    diff = models.TextField(blank=True, default="", help_text="the diff's first PMD_HISTORY_DIFF_LINES lines")
    diff_truncated = models.BooleanField(default=False)
    content = models.ForeignKey(Content, on_delete=models.PROTECT, related_name="commits", db_column="content_hash")
    tsv = SearchVectorField(null=True)  # everything, the diff included: what matches
    # Title, message, author and paths only: small enough to rank every match of a common word
    # (the full vector is read for the best few hundred only; retrieval/history.py).
    tsv_head = SearchVectorField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["collection", "sha"], name="commit_unique_sha")]
        indexes = [
            models.Index(fields=["collection", "committed_at"], name="commit_collection_date"),
            models.Index(fields=["content"], name="commit_content"),
            GinIndex(fields=["tsv"], name="commit_tsv_gin"),
        ]
        ordering = ["collection_id", "-committed_at"]

    def __str__(self) -> str:
        return f"{self.sha[:10]} {self.title}"


# --- API tokens and the keyword index (tables created by the search app's migrations) ---

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
        db_table = "search_apitoken"  # created by the search app; moved here (issue 26)

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
    """Failed bearer-token attempts from one client address (API and MCP), for indexing.services.throttling.

    In the database, not a per-process cache, so every web worker sees the same count.
    """

    address = models.CharField(max_length=64, unique=True)
    failures = models.PositiveIntegerField(default=0)
    window_start = models.DateTimeField(help_text="first failure of the current counting window")
    blocked_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API token failure"
        db_table = "search_tokenfailure"  # created by the search app; moved here (issue 26)

    def __str__(self) -> str:
        return f"{self.address or 'unknown address'}: {self.failures} failures"


# --- BM25 keyword index (indexing/keyword/keyword_index.py) -------------------------------------
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


class IndexSetting(models.Model):
    """The index's own configuration (backend, URLs, models, chunking), one row a setting named
    like its environment variable: every process using the index reads it, so they agree
    whatever environment started them (indexing/services/index_config.py)."""

    name = models.CharField(max_length=64, primary_key=True)
    value = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name}={self.value}"


# --- Search analytics (issue 31): what people searched, what they found, what they opened ----------

class SearchLogEntry(models.Model):
    """One search: by whom, from which face, how it went. Kept PMD_SEARCH_LOG_DAYS days; a member sees
    only their own, staff see all (the team's content gaps are the zero-result and weak queries)."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+")  # None: the local user (CLI on the server)
    token = models.ForeignKey("indexing.ApiToken", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    face = models.CharField(max_length=10)  # cli | api | web | mcp | "" (a script calling the service)
    mode = models.CharField(max_length=10)
    query = models.CharField(max_length=2000)
    results = models.IntegerField()
    top_score = models.FloatField(null=True, blank=True)
    latency_ms = models.FloatField()
    corrected_query = models.CharField(max_length=2000, blank=True, default="")
    opened_uri = models.CharField(max_length=4200, blank=True, default="")  # the first result opened (web, API)

    class Meta:
        ordering = ["-at", "-id"]


class SearchFeedback(models.Model):
    """A thumbs up or down on one result of a logged search, by whoever searched (one per result: the
    last vote counts). Staff read it on the Searches page next to the queries."""

    entry = models.ForeignKey(SearchLogEntry, on_delete=models.CASCADE, related_name="feedback")
    uri = models.CharField(max_length=4200)  # pmd://collection/path of the result
    helpful = models.BooleanField()
    at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [models.UniqueConstraint(fields=["entry", "uri"], name="search_feedback_one_per_result")]


class SavedSearch(models.Model):
    """A query with its filters and mode, kept to run again: private to its owner or shared with a group
    (its members may run it; only the owner changes it). `seen` holds the results of the last run, so
    a run can say what is new since then."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                              related_name="+")  # None: the local user
    name = models.CharField(max_length=100)
    query = models.CharField(max_length=2000)
    mode = models.CharField(max_length=10, default="keyword")
    filters = models.JSONField(default=dict, blank=True)  # SearchFilters.from_dict form
    collections = models.JSONField(default=list, blank=True)
    group = models.ForeignKey("auth.Group", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    last_run = models.DateTimeField(null=True, blank=True)
    seen = models.JSONField(default=list, blank=True)  # the result URIs of the last run
    # The digest of new matches (celery beat, PMD_DIGEST_INTERVAL): POSTed to a webhook, and/or emailed
    # to the owner when email is configured; `digest_seen` is its own memory, apart from a person's runs.
    webhook_url = models.URLField(max_length=2000, blank=True, default="")
    email_digest = models.BooleanField(default=False)
    digest_seen = models.JSONField(default=list, blank=True)
    digest_at = models.DateTimeField(null=True, blank=True)
    # Saved through a token limited to some collections: it keeps that limit (its runs and digests
    # see only `scope_collections`, none once they are all removed), and later changes only narrow it.
    scope_limited = models.BooleanField(default=False)
    scope_collections = models.ManyToManyField("indexing.Collection", blank=True, related_name="+")

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="saved_search_name_per_owner",
                                               nulls_distinct=False)]


# --- Team sign-in --------------------------------------------------------------------------

class ExternalIdentity(models.Model):
    """Who an identity provider (an OpenID provider, the forward-auth proxy, LDAP) says signed in:
    its stable subject, tied to one pmd account, so a name changed at the provider cannot take
    over another account."""

    provider = models.CharField(max_length=100)  # "openid:<id>", "forward-auth", "ldap"
    subject = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identities")
    created = models.DateTimeField(auto_now_add=True)
    last_sign_in = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["provider", "subject"], name="external_identity_unique")]

    def __str__(self) -> str:
        return f"{self.provider}:{self.subject} -> {self.user_id}"
