"""pmd's OAuth 2.1 authorization server, on Authlib's (already a dependency for OpenID sign-in).

Authlib speaks the protocol: the authorization code grant with PKCE (S256 only, required), refresh
tokens, revocation (RFC 7009) and dynamic client registration (RFC 7591), with their error
responses. What is kept, and how a consent becomes a token, is indexing.services.oauth's: an
access token is an ApiToken with the granted scope, so pasted and OAuth tokens are one thing
to the access rule. The adapters below give Authlib the interfaces it asks of clients, codes and
tokens over pmd's models.
"""

from __future__ import annotations

import secrets

from authlib.integrations.django_oauth2 import AuthorizationServer as DjangoAuthorizationServer
from authlib.oauth2.rfc6749 import ClientMixin, grants
from authlib.oauth2.rfc6749.errors import InvalidGrantError, InvalidRequestError
from authlib.oauth2.rfc6750 import BearerTokenGenerator
from authlib.oauth2.rfc7009 import RevocationEndpoint
from authlib.oauth2.rfc7591 import ClientRegistrationEndpoint, InvalidClientMetadataError
from authlib.oauth2.rfc7636 import CodeChallenge

from indexing.errors import PmdError
from indexing.models import OAuthClient, OAuthCode, OAuthGrant
from indexing.services import oauth
from indexing.services.tokens import token_digest

SCOPES = oauth.SCOPES
AUTH_METHODS = oauth.AUTH_METHODS


class Client(ClientMixin):
    """An OAuthClient as Authlib asks for it."""

    def __init__(self, model: OAuthClient):
        self.model = model
        self.client_id = model.client_id

    def get_client_id(self):
        return self.model.client_id

    def get_default_redirect_uri(self):
        return self.model.redirect_uris[0] if self.model.redirect_uris else None

    def get_allowed_scope(self, scope):
        return oauth.granted_scope(scope)

    def check_redirect_uri(self, redirect_uri):
        return redirect_uri in self.model.redirect_uris

    def check_client_secret(self, client_secret):
        digest = self.model.secret_digest
        return bool(digest) and secrets.compare_digest(digest, token_digest(client_secret or ""))

    def check_endpoint_auth_method(self, method, endpoint):
        return method == self.model.auth_method  # token and revocation alike: a secret, once issued, is required

    def check_response_type(self, response_type):
        return response_type == "code"

    def check_grant_type(self, grant_type):
        return grant_type in ("authorization_code", "refresh_token")


class Code:
    """An OAuthCode as Authlib's grant and PKCE extension read it."""

    def __init__(self, model: OAuthCode):
        self.model = model
        self.code_challenge = model.code_challenge
        self.code_challenge_method = model.code_challenge_method

    def get_redirect_uri(self):
        return self.model.redirect_uri

    def get_scope(self):
        return self.model.scope


class Grant:
    """An OAuthGrant as a refresh (or revocable) token, with the value the client presented."""

    def __init__(self, model: OAuthGrant, presented: str = ""):
        self.model = model
        self.presented = presented

    def check_client(self, client: Client) -> bool:
        return self.model.client_id == client.model.pk

    def get_scope(self):
        return "read write" if self.model.token.can_write else "read"


class S256Challenge(CodeChallenge):
    """PKCE as OAuth 2.1 has it: every authorization request carries an S256 challenge."""

    SUPPORTED_CODE_CHALLENGE_METHOD = ["S256"]

    def validate_code_challenge(self, grant, redirect_uri):
        payload = grant.request.payload.data
        if not payload.get("code_challenge"):
            raise InvalidRequestError("PKCE is required: send code_challenge with code_challenge_method=S256")
        if payload.get("code_challenge_method") != "S256":
            raise InvalidRequestError("code_challenge_method must be S256")
        super().validate_code_challenge(grant, redirect_uri)


class AuthorizationCodeGrant(grants.AuthorizationCodeGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS

    def save_authorization_code(self, code, request):
        django_request = request._request  # noqa: SLF001 - Authlib's Django request keeps the original
        oauth.oauth_code_save(
            raw=code,
            client=request.client.model,
            user=request.user,
            redirect_uri=request.payload.redirect_uri or request.client.get_default_redirect_uri(),
            scope=request.scope,
            collections=django_request.POST.getlist("collections"),
            code_challenge=request.payload.data.get("code_challenge"),
            code_challenge_method=request.payload.data.get("code_challenge_method") or "S256",
        )

    def query_authorization_code(self, code, client):
        found = oauth.oauth_code_find(code, client.model)
        return Code(found) if found is not None else None

    def delete_authorization_code(self, authorization_code):
        oauth.oauth_code_delete(authorization_code.model)

    def authenticate_user(self, authorization_code):
        return authorization_code.model.user


class RefreshTokenGrant(grants.RefreshTokenGrant):
    TOKEN_ENDPOINT_AUTH_METHODS = AUTH_METHODS
    INCLUDE_NEW_REFRESH_TOKEN = True  # rotation: a refresh token is good once (OAuth 2.1 for public clients)

    def authenticate_refresh_token(self, refresh_token):
        found = oauth.oauth_grant_find(refresh_token)
        return Grant(found, refresh_token) if found is not None else None

    def authenticate_user(self, refresh_token):
        return refresh_token.model.user

    def revoke_old_credential(self, refresh_token):
        """Nothing left to do: saving the new tokens replaced the old ones (`save_token`)."""


class Revocation(RevocationEndpoint):
    CLIENT_AUTH_METHODS = AUTH_METHODS

    def query_token(self, token_string, token_type_hint):
        found = oauth.oauth_token_find(token_string)
        return Grant(found) if found is not None else None

    def revoke_token(self, token, request):
        oauth.oauth_token_revoke(token.model)


class Registration(ClientRegistrationEndpoint):
    """Open registration (RFC 7591), as Claude and ChatGPT expect: a registered client can do
    nothing until a signed-in member consents on pmd's own page."""

    def authenticate_token(self, request):
        return True

    def get_server_metadata(self):
        return {
            "scopes_supported": list(SCOPES),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": AUTH_METHODS,
        }

    def generate_client_secret(self, request):
        method = request.payload.data.get("token_endpoint_auth_method", "client_secret_basic")
        return None if method == "none" else secrets.token_urlsafe(32)

    def save_client(self, client_info, client_metadata, request):
        try:
            model = self._register(client_info, client_metadata)
        except PmdError as exc:
            raise InvalidClientMetadataError(exc.message) from None
        return Client(model)

    def _register(self, client_info, client_metadata):
        return oauth.oauth_client_register(
            client_id=client_info["client_id"],
            secret=client_info.get("client_secret"),
            name=client_metadata.get("client_name", ""),
            redirect_uris=client_metadata.get("redirect_uris", []),
            auth_method=client_metadata.get("token_endpoint_auth_method", "client_secret_basic"),
            metadata=client_metadata,
        )


class AuthorizationServer(DjangoAuthorizationServer):
    """Authlib's Django server over pmd's models and services."""

    def __init__(self):
        super().__init__(OAuthClient, OAuthGrant)
        self.scopes_supported = list(SCOPES)
        self.register_token_generator(
            "default",
            BearerTokenGenerator(
                access_token_generator=oauth.new_access_value,
                refresh_token_generator=oauth.new_refresh_value,
                expires_generator=lambda client, grant_type: int(oauth.ACCESS_LIFETIME.total_seconds()),
            ),
        )
        self.register_grant(AuthorizationCodeGrant, [S256Challenge(required=True)])
        self.register_grant(RefreshTokenGrant)
        self.register_endpoint(Revocation)
        self.register_endpoint(Registration)

    def validate_requested_scope(self, scope):
        """Scopes pmd does not know (offline_access, openid, a client's own) are dropped, not refused:
        the token response says what was granted (`Client.get_allowed_scope`)."""

    def query_client(self, client_id):
        found = oauth.oauth_client_find(client_id)
        return Client(found) if found is not None else None

    def save_token(self, token, request):
        refreshed = getattr(request, "refresh_token", None)
        try:
            if isinstance(refreshed, Grant):
                oauth.oauth_grant_refresh(
                    refreshed.model,
                    presented=refreshed.presented,
                    access_raw=token["access_token"],
                    refresh_raw=token["refresh_token"],
                )
            else:
                oauth.oauth_grant_create(
                    code=request.authorization_code.model,
                    access_raw=token["access_token"],
                    refresh_raw=token["refresh_token"],
                )
        except PmdError as exc:  # a code or refresh token used twice at once: the second loses
            raise InvalidGrantError(exc.message) from None


_server: AuthorizationServer | None = None


def authorization_server() -> AuthorizationServer:
    global _server
    if _server is None:
        _server = AuthorizationServer()
    return _server
