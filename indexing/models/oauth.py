"""OAuth 2.1 for remote agents: the clients that registered themselves, the short-lived
authorization codes, and the grants a member consented to.

A grant's access token is an ordinary ApiToken (write scope and collection limit included), so
the one access rule (indexing.access) decides what an OAuth client sees, exactly as for a pasted
token. Only digests of codes, secrets and refresh tokens are stored.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from indexing.models.accounts import ApiToken


class OAuthClient(models.Model):
    """An OAuth client (Claude, ChatGPT, an SDK), registered by itself (RFC 7591)."""

    client_id = models.CharField(max_length=64, unique=True)
    secret_digest = models.CharField(max_length=64, blank=True, default="", help_text="empty: a public client")
    name = models.CharField(max_length=200, blank=True, default="")
    redirect_uris = models.JSONField(default=list)
    auth_method = models.CharField(max_length=32, default="none", help_text="token_endpoint_auth_method")
    metadata = models.JSONField(default=dict, help_text="as registered")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created"]
        verbose_name = "OAuth client"

    def __str__(self) -> str:
        return self.name or self.client_id


class OAuthCode(models.Model):
    """An authorization code: what a member consented to, until the client exchanges it once."""

    digest = models.CharField(max_length=64, unique=True)
    client = models.ForeignKey(OAuthClient, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    redirect_uri = models.TextField()
    scope = models.CharField(max_length=200)
    collections = models.ManyToManyField("indexing.Collection", blank=True, related_name="+")
    code_challenge = models.CharField(max_length=128)
    code_challenge_method = models.CharField(max_length=10, default="S256")
    expires = models.DateTimeField()

    @property
    def expired(self) -> bool:
        return self.expires <= timezone.now()


class OAuthGrant(models.Model):
    """A member's consent for one client: its current access token and its refresh token (both
    replaced on each refresh), until revoked."""

    client = models.ForeignKey(OAuthClient, on_delete=models.CASCADE, related_name="grants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oauth_grants")
    token = models.OneToOneField(ApiToken, on_delete=models.CASCADE, related_name="oauth_grant")
    refresh_digest = models.CharField(max_length=64, unique=True)
    replaced_digest = models.CharField(
        max_length=64, blank=True, default="", db_index=True, help_text="the refresh token this one replaced"
    )
    created = models.DateTimeField(auto_now_add=True)
    refreshed = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]
        verbose_name = "OAuth grant"

    def __str__(self) -> str:
        return f"{self.client} for {self.user}{' revoked' if self.revoked else ''}"
