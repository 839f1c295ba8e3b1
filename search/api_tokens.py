"""API tokens: created (raw value returned once), authenticated by digest, revoked.

A token looks like `pmd_<40 url-safe chars>`. The database holds only its SHA-256, so a
leaked database does not leak usable tokens; the short prefix lets people tell tokens apart.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from indexing.errors import InvalidToken
from search.models import ApiToken
from search.throttling import TokenThrottled, check_token_block, record_token_failure  # noqa: F401 (re-exported)

TOKEN_PREFIX = "pmd_"
_LAST_USED_RESOLUTION = timedelta(minutes=1)  # write last_used at most once a minute per token


class TokenError(InvalidToken):
    """A token request that cannot be carried out; the message says why."""


@dataclass
class CreatedToken:
    token: ApiToken
    raw: str  # shown to the user once, never stored


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def _user_for(user) -> object:
    if not isinstance(user, str):
        return user
    User = get_user_model()
    try:
        return User.objects.get(**{User.USERNAME_FIELD: user})
    except User.DoesNotExist:
        raise TokenError(f"no user named '{user}' (create one with `python manage.py createsuperuser` or in the admin)") from None


def token_create(*, user, name: str = "") -> CreatedToken:
    """Make a new token for `user` (a User or a username); the raw value is only in the return."""
    owner = _user_for(user)
    if not owner.is_active:
        raise TokenError(f"user '{owner}' is inactive")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(30)
    token = ApiToken.objects.create(user=owner, name=name.strip()[:100], digest=token_digest(raw),
                                    prefix=raw[: len(TOKEN_PREFIX) + 6])
    return CreatedToken(token=token, raw=raw)


def token_list(*, user=None, include_revoked: bool = False) -> list[ApiToken]:
    qs = ApiToken.objects.select_related("user")
    if user is not None:
        qs = qs.filter(user=_user_for(user))
    if not include_revoked:
        qs = qs.filter(revoked__isnull=True)
    return list(qs)


def token_revoke(*, token: str | int, user=None) -> ApiToken:
    """Revoke by id, by the displayed prefix, or by the raw token itself.

    With `user`, only that user's tokens can match (the web UI: people revoke their own tokens).
    """
    text = str(token).strip()
    qs = ApiToken.objects.select_related("user")
    if user is not None:
        qs = qs.filter(user=_user_for(user))
    if text.isdigit():
        matches = list(qs.filter(pk=int(text)))
    else:
        matches = list(qs.filter(Q(digest=token_digest(text)) | Q(prefix=text.rstrip("…"))))
    if not matches:
        raise TokenError(f"no token matches '{text}' (see `pmd token list`)")
    if len(matches) > 1:
        raise TokenError(f"'{text}' matches {len(matches)} tokens: revoke by id (see `pmd token list`)")
    found = matches[0]
    if found.revoked is None:
        found.revoked = timezone.now()
        found.save(update_fields=["revoked"])
    return found


def token_authenticate(raw: str | None, *, client_address: str | None = None):
    """The active user a raw token belongs to, or None (unknown, revoked, or inactive user).

    With `client_address` (the API and /mcp pass one; "" when unknown) failures are counted per
    address, and a blocked address gets TokenThrottled even for a valid token (search.throttling).
    """
    if not raw:
        return None
    if client_address is not None:
        check_token_block(client_address)
    found = None
    if raw.startswith(TOKEN_PREFIX) and len(raw) <= 200:
        found = (ApiToken.objects.select_related("user")
                 .filter(digest=token_digest(raw), revoked__isnull=True, user__is_active=True).first())
    if found is None:
        if client_address is not None:
            record_token_failure(client_address)
        return None
    now = timezone.now()
    if found.last_used is None or now - found.last_used > _LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=found.pk).update(last_used=now)
    return found.user


def bearer_token(header: str | None) -> str | None:
    """The token from an `Authorization: Bearer …` header value."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None
