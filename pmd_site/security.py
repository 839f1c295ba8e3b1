"""Site-wide protections: who the client is, the Content-Security-Policy, login throttling glue.

- `client_address` is the one answer to "which address is this request from", shared by the
  login lockout (django-axes), the API and the MCP endpoint (indexing.services.throttling).
- `ContentSecurityPolicyMiddleware` gives every HTML page the same policy (Django 5.2 has none).
- `LoginThrottleBackend` is django-axes' lockout check, for logins that come with a request.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.utils.deprecation import MiddlewareMixin

from pmd_site.addresses import normalized_ip


def forwarded_client(remote: str | None, forwarded_for: str | None) -> str | None:
    """The client's address from the connection's address and any X-Forwarded-For header.

    Only behind a declared proxy (PMD_BEHIND_HTTPS_PROXY) does the header count, and then only
    its last entry: that is the address the proxy itself saw; earlier entries are whatever the
    client chose to send. Without the proxy anyone could forge the header to dodge a lockout.
    """
    if getattr(settings, "PMD_BEHIND_HTTPS_PROXY", False) and forwarded_for:
        last = normalized_ip(forwarded_for.split(",")[-1])
        if last:
            return last
    return normalized_ip(remote)


def client_address(request) -> str | None:
    """`forwarded_client` for a Django request (also django-axes' AXES_CLIENT_IP_CALLABLE)."""
    return forwarded_client(request.META.get("REMOTE_ADDR"), request.META.get("HTTP_X_FORWARDED_FOR"))


class LoginThrottleBackend(AxesStandaloneBackend):
    """django-axes' lockout check, skipped for logins without a request (CLI, tests' Client.login).

    Axes refuses such calls outright; there is no client to throttle there, and the password
    is still checked by the next backend.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


SELF = "'self'"


def content_security_policy() -> str:
    """The policy of every HTML page: nothing but pmd's own scripts, styles, fonts and frames.

    Style attributes stay allowed (style-src-attr) for the text-align markdown tables carry;
    <style> elements and inline scripts are not. Remote images only with PMD_ALLOW_REMOTE_IMAGES.
    """
    images = "'self' data: https:" if settings.PMD_ALLOW_REMOTE_IMAGES else "'self' data:"
    return ("default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
            f"img-src {images}; object-src 'none'; base-uri 'self'; frame-ancestors 'none'; "
            f"form-action {' '.join([SELF, *_signin_origins()])}")


def _signin_origins() -> list[str]:
    """The OpenID providers' origins: the sign-out form's answer redirects there (RP-initiated
    logout), and browsers hold a form's redirects to form-action too."""
    origins = []
    for provider in getattr(settings, "PMD_OIDC_PROVIDERS", []):
        parts = urlsplit(provider["issuer"])
        if parts.scheme in {"http", "https"} and parts.netloc and f"{parts.scheme}://{parts.netloc}" not in origins:
            origins.append(f"{parts.scheme}://{parts.netloc}")
    return origins


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    """Adds the policy to HTML responses that do not set their own (raw documents are sandboxed).

    MiddlewareMixin makes it both sync and async, so ASGI requests pay no thread switch.
    """

    def process_response(self, request, response):
        content_type = response.get("Content-Type", "")
        if content_type.startswith("text/html") and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = content_security_policy()
        return response
