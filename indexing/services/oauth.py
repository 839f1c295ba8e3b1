"""OAuth 2.1 grants for remote agents: what the protocol (Authlib, in pmd_site.oauth) stores.

A consent becomes an OAuthGrant whose access token is an ApiToken with the granted scope
(`write` or not, the chosen collections) and a one-hour life; a refresh gives that token a new
value and another hour, and replaces the refresh token itself. So an OAuth access token is
checked by the same `token_access` and limited by the same access rule as a pasted token.
Only digests are stored: of client secrets, codes, access and refresh tokens.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from urllib.parse import urlsplit

from django.db import transaction
from django.utils import timezone

from indexing.access import Access, collection_visible
from indexing.errors import AccessDenied, CollectionNotFound, InvalidToken, TokenNotFound
from indexing.models import ApiToken, OAuthClient, OAuthCode, OAuthGrant
from indexing.services.audit import audit_record
from indexing.services.tokens import TOKEN_PREFIX, token_digest

SCOPES = ("read", "write")
AUTH_METHODS = ["none", "client_secret_post", "client_secret_basic"]
REFRESH_PREFIX = "pmdr_"
CODE_LIFETIME = timedelta(minutes=5)
ACCESS_LIFETIME = timedelta(hours=1)


def new_access_value(*args, **kwargs) -> str:
    """An access token, in the same form as a pasted API token (`pmd_…`)."""
    return TOKEN_PREFIX + secrets.token_urlsafe(30)


def new_refresh_value(*args, **kwargs) -> str:
    return REFRESH_PREFIX + secrets.token_urlsafe(36)


def granted_scope(requested: str | None) -> str:
    """The scopes pmd grants of those asked for: read always, write only when asked."""
    asked = set((requested or "").split())
    return "read write" if "write" in asked else "read"


def oauth_client_register(
    *, client_id: str, secret: str | None, name: str, redirect_uris: list[str], auth_method: str, metadata: dict
) -> OAuthClient:
    """Keep a client that registered itself (RFC 7591); its secret only as a digest."""
    redirect_uris = _redirect_uris(redirect_uris)
    if not isinstance(name, str) or len(name) > 200:
        raise InvalidToken("client_name must be a text of at most 200 characters")
    return OAuthClient.objects.create(
        client_id=client_id,
        secret_digest=token_digest(secret) if secret and auth_method != "none" else "",
        name=(name or "").strip()[:200],
        redirect_uris=list(redirect_uris),
        auth_method=auth_method,
        metadata=metadata,
    )


REFUSED_SCHEMES = {"javascript", "data", "vbscript", "file", "about", "blob"}
MAX_REDIRECT_URIS = 10


def _redirect_uris(uris) -> list[str]:
    """A client's redirect URIs: absolute, without fragments, none a script or a local file (native
    clients' own schemes, such as cursor://, are fine: the member's browser hands them the code)."""
    if not isinstance(uris, list) or not uris:
        raise InvalidToken("a client needs redirect_uris: a list of at least one URI")
    if len(uris) > MAX_REDIRECT_URIS:
        raise InvalidToken(f"a client has at most {MAX_REDIRECT_URIS} redirect URIs")
    for uri in uris:
        if not isinstance(uri, str) or not uri or len(uri) > 2000 or any(c in uri for c in "\x00\r\n\t "):
            raise InvalidToken("each redirect URI is a URI of at most 2000 characters, without spaces")
        parts = urlsplit(uri)
        if not parts.scheme or parts.scheme.lower() in REFUSED_SCHEMES or parts.fragment:
            raise InvalidToken(f"'{uri[:200]}' cannot be a redirect URI: it must be absolute, without a #fragment")
        if parts.scheme.lower() in {"http", "https"} and not parts.hostname:
            raise InvalidToken(f"'{uri[:200]}' names no host")
    return list(uris)


def oauth_client_find(client_id: str | None) -> OAuthClient | None:
    if not client_id or len(client_id) > 64:
        return None
    return OAuthClient.objects.filter(client_id=client_id).first()


def oauth_consent_collections(user, names: list[str]) -> list:
    """The collections a member chose on the consent page, each one they see (else InvalidToken)."""
    access = Access.for_user(user)
    chosen = []
    for name in dict.fromkeys(n.strip() for n in names if n.strip()):
        try:
            chosen.append(collection_visible(name, access))
        except CollectionNotFound:  # the same words for hidden and never created
            raise InvalidToken(f"{user.get_username()} sees no collection named '{name}'") from None
    return chosen


def oauth_code_save(
    *,
    raw: str,
    client: OAuthClient,
    user,
    redirect_uri: str,
    scope: str,
    collections: list[str],
    code_challenge: str,
    code_challenge_method: str,
) -> OAuthCode:
    """What the member consented to, until the client exchanges the code (once, within minutes)."""
    if not user.is_active:
        raise AccessDenied(f"user '{user}' is inactive")
    chosen = oauth_consent_collections(user, collections)
    with transaction.atomic():
        code = OAuthCode.objects.create(
            digest=token_digest(raw),
            client=client,
            user=user,
            redirect_uri=redirect_uri,
            scope=granted_scope(scope),
            code_challenge=code_challenge,
            code_challenge_method=code_challenge_method,
            expires=timezone.now() + CODE_LIFETIME,
        )
        code.collections.set(chosen)
    return code


def oauth_code_find(raw: str | None, client: OAuthClient) -> OAuthCode | None:
    """A live code issued to `client`; None for anything else (unknown, expired, another client's)."""
    if not raw or len(raw) > 200:
        return None
    code = OAuthCode.objects.select_related("user").filter(digest=token_digest(raw), client=client).first()
    if code is None or code.expired or not code.user.is_active:
        return None
    return code


def oauth_code_delete(code: OAuthCode) -> None:
    OAuthCode.objects.filter(pk=code.pk).delete()
    OAuthCode.objects.filter(expires__lt=timezone.now()).delete()  # and the ones never exchanged


def _access_token(*, client: OAuthClient, user, raw: str, can_write: bool, collections) -> ApiToken:
    token = ApiToken.objects.create(
        user=user,
        name=f"OAuth: {client}"[:100],
        digest=token_digest(raw),
        prefix=raw[: len(TOKEN_PREFIX) + 6],
        can_write=can_write,
        expires=timezone.now() + ACCESS_LIFETIME,
    )
    token.collections.set(collections)
    return token


def oauth_grant_create(*, code: OAuthCode, access_raw: str, refresh_raw: str) -> OAuthGrant:
    """The tokens for an exchanged code: an access token with the consented scope and collections.
    A member's earlier grants to the same client end: the newest consent is the one that holds."""
    earlier = list(
        OAuthGrant.objects.select_related("client", "user").filter(
            client=code.client, user=code.user, revoked__isnull=True
        )
    )
    collections = list(code.collections.all())
    with transaction.atomic():
        # Taken here, once: of two exchanges of one code at the same moment, one finds it gone.
        taken, _ = OAuthCode.objects.filter(pk=code.pk).delete()
        if not taken:
            raise TokenNotFound("this authorization code was already used")
        for grant in earlier:
            _revoke(grant, Access.for_user(code.user), reason="allowed again")
        token = _access_token(
            client=code.client,
            user=code.user,
            raw=access_raw,
            can_write="write" in code.scope.split(),
            collections=collections,
        )
        grant = OAuthGrant.objects.create(
            client=code.client, user=code.user, token=token, refresh_digest=token_digest(refresh_raw)
        )
        audit_record(
            Access.for_user(code.user),
            "oauth.grant",
            f"{code.client} for {code.user.get_username()}",
            client_id=code.client.client_id,
            scope=code.scope,
            collections=sorted(c.name for c in collections),
        )
    return grant


def oauth_grant_find(refresh_raw: str | None) -> OAuthGrant | None:
    """The live grant a refresh token belongs to.

    A refresh token that was already replaced finds nothing, and ends its grant: either the client
    or someone who copied the token is replaying it, and pmd cannot tell which (OAuth 2.1's advice
    for public clients). The member allows the client again to continue.
    """
    if not refresh_raw or not refresh_raw.startswith(REFRESH_PREFIX) or len(refresh_raw) > 200:
        return None
    digest = token_digest(refresh_raw)
    grants = OAuthGrant.objects.select_related("client", "user", "token").filter(revoked__isnull=True)
    # A grant whose access token was revoked elsewhere (the admin, `pmd token revoke`, its only
    # collection removed) is over too: refreshing it would hand out a dead token.
    found = grants.filter(refresh_digest=digest, user__is_active=True, token__revoked__isnull=True).first()
    if found is None:
        for replayed in grants.filter(replaced_digest=digest):
            _revoke(replayed, None, reason="a replaced refresh token was used again")
    return found


def oauth_grant_refresh(grant: OAuthGrant, *, presented: str, access_raw: str, refresh_raw: str) -> OAuthGrant:
    """A new access token value (same token row: same scope and collections, a fresh hour) and a new
    refresh token for the `presented` one; the old values stop working at once. Of two refreshes
    with one refresh token at the same moment, the second finds it replaced."""
    with transaction.atomic():
        grant = OAuthGrant.objects.select_for_update().select_related("token", "client", "user").get(pk=grant.pk)
        if grant.revoked is not None:
            raise TokenNotFound("this grant was revoked")
        if grant.refresh_digest != token_digest(presented):
            raise TokenNotFound("this refresh token was already used")
        ApiToken.objects.filter(pk=grant.token_id).update(
            digest=token_digest(access_raw),
            prefix=access_raw[: len(TOKEN_PREFIX) + 6],
            expires=timezone.now() + ACCESS_LIFETIME,
        )
        grant.replaced_digest = grant.refresh_digest
        grant.refresh_digest = token_digest(refresh_raw)
        grant.refreshed = timezone.now()
        grant.save(update_fields=["replaced_digest", "refresh_digest", "refreshed"])
    return grant


def oauth_token_find(raw: str | None) -> OAuthGrant | None:
    """The grant an access or refresh token belongs to (for revocation)."""
    if not raw or len(raw) > 200:
        return None
    if raw.startswith(REFRESH_PREFIX):
        return oauth_grant_find(raw)
    return (
        OAuthGrant.objects.select_related("client", "user", "token")
        .filter(token__digest=token_digest(raw), revoked__isnull=True)
        .first()
    )


def _revoke(grant: OAuthGrant, access: Access | None, **detail) -> None:
    """End a grant: its access token and refresh token at once. `access` None: pmd itself."""
    now = timezone.now()
    with transaction.atomic():
        OAuthGrant.objects.filter(pk=grant.pk, revoked__isnull=True).update(revoked=now)
        ApiToken.objects.filter(pk=grant.token_id, revoked__isnull=True).update(revoked=now)
        audit_record(access, "oauth.revoke", f"{grant.client} for {grant.user.get_username()}", **detail)


def oauth_token_revoke(grant: OAuthGrant) -> None:
    """The client gave up its tokens (RFC 7009): the whole grant ends, access and refresh."""
    _revoke(grant, Access.for_token(grant.token))


def oauth_grants(*, user) -> list[OAuthGrant]:
    """A member's live OAuth grants, newest first (the web API tokens page)."""
    return list(
        OAuthGrant.objects.select_related("client", "token")
        .prefetch_related("token__collections")
        .filter(user=user, revoked__isnull=True, token__revoked__isnull=True)
    )


def oauth_grant_revoke(*, grant_id: int, access: Access) -> OAuthGrant:
    """A member revokes a client's access (their own grants; a superuser anyone's)."""
    grants = OAuthGrant.objects.select_related("client", "user").filter(pk=grant_id, revoked__isnull=True)
    if not access.is_superuser:
        grants = grants.filter(user_id=getattr(access.user, "pk", None) if access.active else None)
    grant = grants.first()
    if grant is None:
        raise TokenNotFound(f"no OAuth client access matches '{grant_id}'")
    refuse_through_token(access)
    _revoke(grant, access)
    return grant


def refuse_through_token(access: Access) -> None:
    """Grants are managed by the member in the web UI, not by a token (OAuth or pasted)."""
    if access.token is not None:
        raise AccessDenied("OAuth clients are managed in the web UI, not with a token")
