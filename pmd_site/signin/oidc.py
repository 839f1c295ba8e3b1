"""OpenID Connect: sign in with the team's identity provider (Authentik, Keycloak, Authelia,
Pocket ID, Kanidm …), one or more, from PMD_OIDC_PROVIDERS.

The authorization code flow with PKCE (S256), a fresh state and nonce per attempt (each state is
used once), and every ID token checked before anyone is signed in: signature against the
provider's published keys (asymmetric algorithms only, never `none`), issuer, audience,
expiry, issue time and nonce. Authlib's OAuth 2 client runs the flow; joserfc (Authlib's JOSE
library) verifies the token.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlencode

import httpx
from django.conf import settings

from indexing import errors

if TYPE_CHECKING:
    from authlib.integrations.httpx_client import OAuth2Client
    from joserfc.jwk import KeySet
# Authlib and joserfc (17 MB with cryptography) load at the first sign-in through a provider, not
# in every web server whether OpenID Connect is configured or not (memory).

# Signatures an ID token may carry: public-key ones (a client secret is no key the provider
# alone holds, and `none` is no signature).
SIGNING_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
CLOCK_LEEWAY = 60  # seconds of clock difference allowed between pmd and the provider
METADATA_SECONDS = 300  # how long discovery answers and keys are reused


@dataclass(frozen=True)
class Provider:
    id: str
    name: str
    issuer: str
    client_id: str
    client_secret: str
    scopes: str
    username_claim: str


def providers() -> list[Provider]:
    return [Provider(**p) for p in settings.PMD_OIDC_PROVIDERS]


def provider_named(ident: str) -> Provider:
    for provider in providers():
        if provider.id == ident:
            return provider
    raise errors.SignInFailed(f"no OpenID provider named '{ident}' is configured")


_cache: dict[tuple[str, str], tuple[float, object]] = {}
_cache_lock = threading.Lock()


def _get_json(url: str, what: str) -> dict:
    try:
        response = httpx.get(url, timeout=settings.PMD_OIDC_TIMEOUT, follow_redirects=True)
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise errors.SignInFailed(f"the identity provider's {what} could not be read from {url}: {exc}") from None


def _cached(key: tuple[str, str], load, *, fresh: bool = False):
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None and not fresh and time.monotonic() - hit[0] < METADATA_SECONDS:
        return hit[1]
    value = load()
    with _cache_lock:
        _cache[key] = (time.monotonic(), value)
    return value


def discovery(provider: Provider, *, fresh: bool = False) -> dict:
    """The provider's metadata (/.well-known/openid-configuration), for the issuer configured:
    a document naming another issuer is refused (it is not the provider pmd was told to trust)."""

    def load():
        metadata = _get_json(provider.issuer.rstrip("/") + "/.well-known/openid-configuration", "discovery document")
        if str(metadata.get("issuer", "")).rstrip("/") != provider.issuer.rstrip("/"):
            raise errors.SignInFailed(
                f"the discovery document of {provider.issuer} names another issuer: {metadata.get('issuer')!r}"
            )
        for field in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not metadata.get(field):
                raise errors.SignInFailed(f"the discovery document of {provider.issuer} has no {field}")
        return metadata

    return _cached((provider.id, "metadata"), load, fresh=fresh)


def _keys(provider: Provider, metadata: dict, *, fresh: bool = False) -> KeySet:
    from joserfc.jwk import KeySet

    return _cached(
        (provider.id, "keys"),
        lambda: KeySet.import_key_set(_get_json(metadata["jwks_uri"], "signing keys")),
        fresh=fresh,
    )


def _client(provider: Provider, redirect_uri: str, metadata: dict | None = None, **kwargs) -> OAuth2Client:
    from authlib.integrations.httpx_client import OAuth2Client

    methods = (metadata or {}).get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    method = (
        "none"
        if not provider.client_secret
        else "client_secret_basic"
        if "client_secret_basic" in methods
        else "client_secret_post"
    )
    return OAuth2Client(
        client_id=provider.client_id,
        client_secret=provider.client_secret or None,
        token_endpoint_auth_method=method,
        scope=provider.scopes,
        redirect_uri=redirect_uri,
        code_challenge_method="S256",
        timeout=settings.PMD_OIDC_TIMEOUT,
        **kwargs,
    )


def authorization_start(provider: Provider, *, redirect_uri: str) -> tuple[str, dict]:
    """The provider's sign-in URL and what the callback needs to check its answer (kept in the
    session): state, nonce and the PKCE verifier."""
    from authlib.common.security import generate_token

    metadata = discovery(provider)
    pending = {
        "provider": provider.id,
        "state": generate_token(32),
        "nonce": generate_token(32),
        "verifier": generate_token(64),
        "at": time.time(),
    }
    with _client(provider, redirect_uri) as client:
        url, _ = client.create_authorization_url(
            metadata["authorization_endpoint"],
            state=pending["state"],
            nonce=pending["nonce"],
            code_verifier=pending["verifier"],
        )
    return url, pending


def id_token_claims(provider: Provider, metadata: dict, id_token: str, *, nonce: str) -> dict:
    """The ID token's claims once its signature and claims check out; SignInFailed otherwise."""
    from joserfc import jwt
    from joserfc.errors import JoseError

    try:
        try:
            token = jwt.decode(id_token, _keys(provider, metadata), algorithms=SIGNING_ALGORITHMS)
        except JoseError:  # perhaps signed with a key the provider added since: fetch them again, once
            token = jwt.decode(id_token, _keys(provider, metadata, fresh=True), algorithms=SIGNING_ALGORITHMS)
    except (JoseError, ValueError) as exc:
        raise errors.SignInFailed(f"the ID token's signature does not verify: {_jose_reason(exc)}") from None
    essential = {"essential": True}
    registry = jwt.JWTClaimsRegistry(
        leeway=CLOCK_LEEWAY,
        iss={"essential": True, "value": metadata["issuer"]},
        aud={"essential": True, "value": provider.client_id},
        sub=essential,
        exp=essential,
        iat=essential,
        nonce={"essential": True, "value": nonce},
    )
    try:
        registry.validate(token.claims)
    except JoseError as exc:
        raise errors.SignInFailed(f"the ID token is not valid: {_jose_reason(exc)}") from None
    audience = token.claims["aud"]
    if isinstance(audience, list) and len(audience) > 1 and token.claims.get("azp") != provider.client_id:
        raise errors.SignInFailed("the ID token was issued to another client (azp)")
    return dict(token.claims)


def _jose_reason(exc: Exception) -> str:
    return getattr(exc, "description", "") or getattr(exc, "error", "") or str(exc) or type(exc).__name__


def authorization_finish(provider: Provider, pending: dict, params: dict, *, redirect_uri: str) -> tuple[dict, str]:
    """The person's claims (ID token, completed from the userinfo endpoint) and the raw ID token
    (kept for sign-out), from the provider's answer at the callback."""
    from authlib.common.errors import AuthlibBaseError

    metadata = discovery(provider)
    if params.get("error"):
        raise errors.SignInFailed(
            f"the identity provider refused the sign-in: {params.get('error_description') or params['error']}"
        )
    if "iss" in params and params["iss"] != metadata["issuer"]:  # RFC 9207: the answer's sender
        raise errors.SignInFailed("the answer came from another issuer than the one asked")
    if not params.get("code"):
        raise errors.SignInFailed("the identity provider's answer has no authorization code")
    with _client(provider, redirect_uri, metadata) as client:
        try:
            token = client.fetch_token(
                metadata["token_endpoint"],
                grant_type="authorization_code",
                code=params["code"],
                code_verifier=pending["verifier"],
            )
        except (AuthlibBaseError, httpx.HTTPError, ValueError) as exc:  # OAuthError: a code not of this flow
            raise errors.SignInFailed(f"the identity provider did not exchange the code: {exc}") from None
        if not token.get("id_token"):
            raise errors.SignInFailed("the identity provider answered without an ID token (is 'openid' in the scopes?)")
        claims = id_token_claims(provider, metadata, token["id_token"], nonce=pending["nonce"])
        wanted = {provider.username_claim, settings.PMD_GROUPS_CLAIM, "email"}
        if metadata.get("userinfo_endpoint") and not wanted <= claims.keys():
            try:
                response = client.get(metadata["userinfo_endpoint"])
                response.raise_for_status()
                info = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                raise errors.SignInFailed(f"the identity provider's userinfo could not be read: {exc}") from None
            if info.get("sub") != claims["sub"]:
                raise errors.SignInFailed("the userinfo answer is about someone else than the ID token")
            claims = {**info, **claims}
    return claims, token["id_token"]


def logout_url(provider: Provider, *, id_token: str, after: str) -> str | None:
    """Where to end the provider's session too (RP-initiated logout), when it offers that."""
    try:
        endpoint = discovery(provider).get("end_session_endpoint")
    except errors.SignInFailed:
        return None
    if not endpoint:
        return None
    query = urlencode({"id_token_hint": id_token, "post_logout_redirect_uri": after, "client_id": provider.client_id})
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"


def discovery_status(provider: Provider) -> str:
    """For `pmd status`: whether the provider's discovery answers now."""
    try:
        discovery(provider, fresh=True)
    except errors.SignInFailed as exc:
        return f"not answering: {exc}"
    return "answering"
