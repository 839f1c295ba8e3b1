"""Forward authentication: a reverse proxy (Authelia, Authentik's outpost, oauth2-proxy, Traefik or
Caddy forward-auth) signs people in and names them in request headers.

The headers count only on connections from the proxies in PMD_FORWARD_AUTH_PROXIES; from any
other address they are ignored, or anyone could send `Remote-User: admin`. The connection's own
address is checked, never X-Forwarded-For (which the client writes).
"""

from __future__ import annotations

import hashlib
import logging

from django.conf import settings
from django.contrib.auth import login
from django.utils.deprecation import MiddlewareMixin

from indexing import errors
from indexing.services.accounts import ProviderSignIn, provider_sign_in
from pmd_site.security import address_in
from pmd_site.web.errors import problem_response

log = logging.getLogger(__name__)

PROVIDER = "forward-auth"
SESSION_KEY = "pmd_forward_auth"  # digest of the headers the session was signed in with
BACKEND = "pmd_site.signin.backends.ProviderBackend"


def _meta_key(header: str) -> str:
    return "HTTP_" + header.upper().replace("-", "_")


def from_trusted_proxy(remote_addr: str | None) -> bool:
    """Whether the connection itself comes from a forward-auth proxy (never X-Forwarded-For)."""
    return address_in(remote_addr, settings.PMD_FORWARD_AUTH_PROXIES)


def header_text(request, header: str) -> str | None:
    """A header's value as the proxy sent it, UTF-8 (servers hand headers over decoded as
    latin-1, which would make José "JosÃ©" and tell рус from сут by nothing). SignInRefused
    when the bytes are not UTF-8."""
    value = request.META.get(_meta_key(header))
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except UnicodeError:
        raise errors.SignInRefused(f"the proxy's {header} header is not UTF-8 text") from None


def header_groups(value: str) -> list[str]:
    """Remote-Groups as proxies send it: comma-separated (Authelia, Authentik), or spaces."""
    separator = "," if "," in value else None
    return [g.strip() for g in value.split(separator) if g.strip()]


class ForwardAuthMiddleware(MiddlewareMixin):
    """Signs in the person the trusted proxy names; again (groups and role refreshed) whenever
    the proxy names someone else or sends other groups."""

    def process_request(self, request):
        if not settings.PMD_FORWARD_AUTH or not from_trusted_proxy(request.META.get("REMOTE_ADDR")):
            return None
        try:
            username = (header_text(request, settings.PMD_FORWARD_AUTH_USER_HEADER) or "").strip()
            if not username:
                return None
            raw_groups = header_text(request, settings.PMD_FORWARD_AUTH_GROUPS_HEADER)
            email = (header_text(request, settings.PMD_FORWARD_AUTH_EMAIL_HEADER) or "").strip()
            digest = hashlib.sha256("\n".join([username, raw_groups or "", email]).encode()).hexdigest()
            if request.user.is_authenticated and request.session.get(SESSION_KEY) == digest:
                return None
            groups = header_groups(raw_groups) if raw_groups is not None else None
            # The subject is the proxy's name for the person exactly as sent: it alone links an account.
            user = provider_sign_in(
                signin=ProviderSignIn(
                    provider=PROVIDER, subject=username, username=username, email=email, groups=groups
                )
            )
        except errors.PmdError as exc:  # a deactivated account, a name pmd may not take, not UTF-8
            log.warning("forward auth: %s", exc)
            return problem_response(request, exc)
        login(request, user, backend=BACKEND)
        request.session[SESSION_KEY] = digest
        return None
