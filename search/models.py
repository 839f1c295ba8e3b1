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
