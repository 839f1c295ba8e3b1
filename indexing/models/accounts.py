"""Who signs in and how: API tokens and failed token attempts, the identities providers vouch
for, and the audit trail of changes to who sees what. The token tables keep the names the
search app created them with."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """A per-user bearer token. Only its SHA-256 digest is stored; the raw value is shown once."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, default="")
    digest = models.CharField(max_length=64, unique=True, editable=False, help_text="sha256 of the token")
    prefix = models.CharField(max_length=16, editable=False, help_text="first characters, to recognise a token")
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True, editable=False)
    revoked = models.DateTimeField(null=True, blank=True)
    can_write = models.BooleanField(
        default=False, help_text="may change things its user may change; read-only otherwise"
    )
    collections = models.ManyToManyField(
        "indexing.Collection",
        blank=True,
        related_name="+",
        help_text="limited to these (of those its user may see); none: all of them",
    )
    expires = models.DateTimeField(null=True, blank=True, help_text="refused after this time; empty: never")

    class Meta:
        ordering = ["-created"]
        verbose_name = "API token"
        db_table = "search_apitoken"  # created by the search app

    def __str__(self) -> str:
        label = f"{self.prefix}… {self.name}".strip()
        return f"{label} ({self.user}){' revoked' if self.revoked else ''}"

    @property
    def active(self) -> bool:
        return self.revoked is None and not self.expired

    @property
    def expired(self) -> bool:
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
        db_table = "search_tokenfailure"  # created by the search app

    def __str__(self) -> str:
        return f"{self.address or 'unknown address'}: {self.failures} failures"


class ExternalIdentity(models.Model):
    """Who an identity provider (an OpenID provider, the forward-auth proxy, LDAP) says signed in:
    its stable subject, tied to one pmd account, so a name changed at the provider cannot take
    over another account."""

    provider = models.CharField(max_length=100)  # "openid:<id>", "forward-auth", "ldap"
    subject = models.CharField(max_length=255)
    # The OpenID issuer that vouched for `subject` (a `sub` is unique only within its issuer); empty
    # for the other providers, and for a link an admin made until its first sign-in fills it.
    issuer = models.CharField(max_length=500, blank=True, default="")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identities")
    created = models.DateTimeField(auto_now_add=True)
    last_sign_in = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["provider", "subject"], name="external_identity_unique")]

    def __str__(self) -> str:
        return f"{self.provider}:{self.subject} -> {self.user_id}"


class AuditEvent(models.Model):
    """A change that matters for who sees what: collections, sharing, tokens, contexts, groups."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
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
