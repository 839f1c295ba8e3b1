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
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from indexing.access import Access, collection_visible
from indexing.errors import AccessDenied, CollectionNotFound, InvalidToken, TokenNotFound, UserNotFound
from indexing.models import ApiToken
from indexing.services.audit import audit_record
from indexing.services.throttling import check_token_block, record_token_failure

TOKEN_PREFIX = "pmd_"
_LAST_USED_RESOLUTION = timedelta(minutes=1)  # write last_used at most once a minute per token


@dataclass
class CreatedToken:
    token: ApiToken
    raw: str  # shown to the user once, never stored


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


def _user_for(user) -> object:
    if not isinstance(user, str):
        return user
    user_model = get_user_model()
    try:
        return user_model.objects.get(**{user_model.USERNAME_FIELD: user})
    except user_model.DoesNotExist:
        raise UserNotFound(name=user) from None


_EXPIRY_UNITS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


def parse_expiry(text: str | None) -> timedelta | None:
    """`30d`, `12h`, `2w`, `1y`, `90m` (or empty / `never`) → a duration; InvalidToken otherwise."""
    text = (text or "").strip().lower()
    if text in {"", "never", "none", "0"}:
        return None
    number, unit = text[:-1], text[-1:]
    if unit.isdigit():
        number, unit = text, "d"
    if not number.isdigit() or unit not in _EXPIRY_UNITS or int(number) < 1:
        raise InvalidToken(
            f"'{text}' is not an expiry: use a number of minutes, hours, days, weeks or years "
            "such as 90m, 12h, 30d, 2w, 1y (or never)"
        )
    seconds = int(number) * _EXPIRY_UNITS[unit]
    if seconds > 10 * 365 * 86400:
        raise InvalidToken("an expiry is at most 10 years")
    return timedelta(seconds=seconds)


def _may_manage_tokens_of(access: Access, user_id) -> bool:
    """Everyone manages their own tokens; only superusers (and the local user) anyone's."""
    return access.is_superuser or (access.active and user_id == getattr(access.user, "pk", None))


def token_create(
    *,
    user,
    name: str = "",
    access: Access,
    can_write: bool = False,
    collections: list[str] | None = None,
    expires_in: timedelta | str | None = None,
) -> CreatedToken:
    """Make a new token for `user` (a User or a username); the raw value is only in the return.

    Read-only unless `can_write`; limited to `collections` when some are named (each must be one
    the user sees: the scope is re-checked against the user's access on every request anyway).
    `access` is who asks: members and staff make tokens for themselves; superusers and the local
    user for anyone (a token acts with its user's rights, so making one for someone else is
    taking their rights: staff making a superuser's token would climb to superuser).
    """
    owner = _user_for(user)
    if not _may_manage_tokens_of(access, owner.pk):
        raise AccessDenied("making a token for another user needs a superuser account")
    if not owner.is_active:
        raise InvalidToken(f"user '{owner}' is inactive")
    if access.token is not None:
        raise AccessDenied("tokens are made in the web UI, the admin or with the CLI, not with another token")
    names = list(dict.fromkeys(c.strip() for c in collections or () if c.strip()))
    owner_access = Access.for_user(owner)
    limited = []
    for collection_name in names:
        try:
            limited.append(collection_visible(collection_name, owner_access))
        except CollectionNotFound:  # the same words for hidden and never created
            raise InvalidToken(f"{owner.get_username()} sees no collection named '{collection_name}'") from None
    if isinstance(expires_in, str):
        expires_in = parse_expiry(expires_in)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(30)
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=owner,
            name=name.strip()[:100],
            digest=token_digest(raw),
            prefix=raw[: len(TOKEN_PREFIX) + 6],
            can_write=bool(can_write),
            expires=timezone.now() + expires_in if expires_in else None,
        )
        token.collections.set(limited)
        audit_record(
            access,
            "token.create",
            f"{token.prefix}… of {owner.get_username()}",
            name=token.name,
            write=token.can_write,
            collections=names,
            expires=token.expires.isoformat() if token.expires else None,
        )
    return CreatedToken(token=token, raw=raw)


def token_scope(token: ApiToken) -> dict:
    """What a token may do, in the words every face shows."""
    return {
        "write": token.can_write,
        "collections": sorted(c.name for c in token.collections.all()),
        "expires": token.expires.isoformat() if token.expires else None,
    }


def token_list(*, user=None, include_revoked: bool = False) -> list[ApiToken]:
    """Pasted tokens; those OAuth clients hold are listed with their grants (indexing.services.oauth)."""
    qs = ApiToken.objects.select_related("user").prefetch_related("collections").filter(oauth_grant__isnull=True)
    if user is not None:
        qs = qs.filter(user=_user_for(user))
    if not include_revoked:
        qs = qs.filter(revoked__isnull=True)
    return list(qs)


def token_revoke(*, token: str | int, access: Access, user=None) -> ApiToken:
    """Revoke by id, by the displayed prefix, or by the raw token itself.

    With `user`, only that user's tokens can match (the web UI: people revoke their own tokens).
    Anyone but a superuser (or the local user) matches only their own: another user's token is
    "no token matches", as one that never existed.
    """
    text = str(token).strip()
    qs = ApiToken.objects.select_related("user")
    if user is not None:
        qs = qs.filter(user=_user_for(user))
    if not access.is_superuser:
        qs = qs.filter(user_id=getattr(access.user, "pk", None) if access.active else None)
    if text.isdigit():
        matches = list(qs.filter(pk=int(text)))
    else:
        matches = list(qs.filter(Q(digest=token_digest(text)) | Q(prefix=text.rstrip("…"))))
    if not matches:
        raise TokenNotFound(f"no token matches '{text}'")
    if len(matches) > 1:
        raise InvalidToken(f"'{text}' matches {len(matches)} tokens: revoke by id")
    found = matches[0]
    if found.revoked is None:
        found.revoked = timezone.now()
        found.save(update_fields=["revoked"])
        audit_record(access, "token.revoke", f"{found.prefix}… of {found.user.get_username()}", name=found.name)
    return found


def token_authenticate(raw: str | None, *, client_address: str | None = None) -> ApiToken | None:
    """The token, if it is live (known, not revoked, not expired, its user active); else None.

    With `client_address` (the API and /mcp pass one; "" when unknown) failures are counted per
    address, and a blocked address gets TokenThrottled even for a valid token (indexing.services.throttling).
    """
    if not raw:
        return None
    if client_address is not None:
        check_token_block(client_address)
    found = None
    if raw.startswith(TOKEN_PREFIX) and len(raw) <= 200:
        found = (
            ApiToken.objects.select_related("user")
            .filter(
                Q(expires__isnull=True) | Q(expires__gt=timezone.now()),
                digest=token_digest(raw),
                revoked__isnull=True,
                user__is_active=True,
            )
            .first()
        )
    if found is None:
        if client_address is not None:
            record_token_failure(client_address)
        return None
    now = timezone.now()
    if found.last_used is None or now - found.last_used > _LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=found.pk).update(last_used=now)
    return found


def token_access(raw: str | None, *, client_address: str | None = None) -> Access | None:
    """The principal a raw bearer token stands for (the API and /mcp), or None."""
    token = token_authenticate(raw, client_address=client_address)
    return Access.for_token(token) if token is not None else None


def bearer_token(header: str | None) -> str | None:
    """The token from an `Authorization: Bearer …` header value."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None
