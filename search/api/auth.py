"""Who calls the API: a per-user bearer token, or the web UI's session (CSRF for unsafe methods).

A bearer token is checked by search.api_tokens, which counts failures per client address and
raises TokenThrottled (429, mapped in search.api.errors) while an address is blocked.
Managing collections and contexts needs a staff account: `require_staff`.
"""

from django.conf import settings
from django.http import HttpRequest
from ninja.errors import AuthenticationError, HttpError
from ninja.security import HttpBearer
from ninja.security.apikey import APIKeyCookie

from pmd_site.security import client_address
from search.api_tokens import token_authenticate


class TokenAuth(HttpBearer):
    """`Authorization: Bearer pmd_…` → the token's user."""

    def authenticate(self, request: HttpRequest, token: str):
        user = token_authenticate(token, client_address=client_address(request) or "")
        if user is None:
            raise AuthenticationError(401, "invalid or revoked API token")
        request.user = user
        return user


class SessionAuth(APIKeyCookie):
    """The web UI's session; CSRF is checked for unsafe methods, only once a session user exists."""

    param_name = "sessionid"

    def __init__(self):
        self.param_name = settings.SESSION_COOKIE_NAME
        super().__init__(csrf=True)

    def __call__(self, request: HttpRequest):
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None  # anonymous: 401, not a CSRF complaint
        return super().__call__(request)

    def authenticate(self, request: HttpRequest, key: str | None):
        return request.user


def is_staff(request) -> bool:
    """Whether the authenticated caller (token or session) has a staff account."""
    return bool(getattr(request.auth, "is_staff", False))


def require_staff(request) -> None:
    if not is_staff(request):
        raise HttpError(403, "managing collections and contexts needs a staff account")
