"""Searches and answers: what people searched, what they found and opened, the searches they
keep to run again, and the questions Ask answered."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models


class SearchLogEntry(models.Model):
    """One search: by whom, from which face, how it went. Kept PMD_SEARCH_LOG_DAYS days; a member sees
    only their own, staff see all (the team's content gaps are the zero-result and weak queries)."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )  # None: the local user (CLI on the server)
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

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )  # None: the local user
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
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="saved_search_name_per_owner", nulls_distinct=False)
        ]


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

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="answers",
        help_text="empty: the local user (CLI)",
    )
    conversation = models.UUIDField(
        default=uuid.uuid4, db_index=True, help_text="answers sharing it are one conversation: follow-ups"
    )
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
