"""Who calls the API: a per-user bearer token, or the web UI's session (CSRF for unsafe methods).

Either way `request.auth` is the caller's `indexing.access.Access`, which every endpoint hands
to the services: it decides which collections exist for the caller and whether they may write.
A bearer token is checked by indexing.services.tokens, which counts failures per client address and
raises TokenThrottled (429, mapped in pmd_site.api.errors) while an address is blocked.
"""

from django.conf import settings
from django.http import HttpRequest
from ninja.errors import AuthenticationError
from ninja.security import HttpBearer
from ninja.security.apikey import APIKeyCookie

from indexing.access import Access
from indexing.services.tokens import token_access
from pmd_site.security import client_address


class TokenAuth(HttpBearer):
    """`Authorization: Bearer pmd_…` → the token's Access (its user, within its scope)."""

    def authenticate(self, request: HttpRequest, token: str):
        access = token_access(token, client_address=client_address(request) or "")
        if access is None:
            raise AuthenticationError(401, "invalid, expired or revoked API token")
        request.user = access.user
        return access


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
        return Access.for_user(request.user)


def is_staff(request) -> bool:
    """Whether the authenticated caller (token or session) has a staff account."""
    return request.auth.is_staff
