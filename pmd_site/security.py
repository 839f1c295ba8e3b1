"""Site-wide protections: who the client is, the Content-Security-Policy, login throttling glue.

- `client_address` is the one answer to "which address is this request from", shared by the
  login lockout (django-axes), the API and the MCP endpoint (indexing.services.throttling).
  Forwarded headers are read here only, and only from the trusted proxies: the web server's own
  reading of them stays off (`pmd serve`).
- `ContentSecurityPolicyMiddleware` gives every HTML page the same policy (Django 5.2 has none).
- `LoginThrottleBackend` is django-axes' lockout check, for logins that come with a request.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.utils.deprecation import MiddlewareMixin

from pmd_site.addresses import normalized_ip


def address_in(address: str | None, networks) -> bool:
    """Whether `address` (a connection's, as the server gives it) lies in one of `networks`."""
    address = normalized_ip(address)
    if address is None:
        return False
    ip = ipaddress.ip_address(address)
    return any(ip.version == net.version and ip in net for net in networks)


def trusted_proxy(address: str | None) -> bool:
    """Whether `address` is one of the declared reverse proxies (PMD_TRUSTED_PROXIES, and the
    forward-auth proxies PMD_FORWARD_AUTH_PROXIES): only they may say who the client is."""
    networks = [*getattr(settings, "PMD_TRUSTED_PROXIES", []), *getattr(settings, "PMD_FORWARD_AUTH_PROXIES", [])]
    return address_in(address, networks)


def forwarded_client(remote: str | None, forwarded_for: str | None) -> str | None:
    """The client's address from the connection's own address and any X-Forwarded-For header.

    The header counts only on a connection from a trusted proxy, and then only from the right:
    each trusted proxy appends the address it saw, so the right-most entry that is not a trusted
    proxy is the client; entries left of it are whatever the client chose to send. From any
    other connection the header is the client's to forge (to dodge a lockout), so it is ignored.
    """
    client = normalized_ip(remote)
    if not forwarded_for or not trusted_proxy(client):
        return client
    for hop in reversed(forwarded_for.split(",")):
        address = normalized_ip(hop)
        if address is None:
            break  # nothing left of a malformed entry can be believed
        client = address
        if not trusted_proxy(address):
            break
    return client


def client_address(request) -> str | None:
    """`forwarded_client` for a Django request (also django-axes' AXES_CLIENT_IP_CALLABLE)."""
    return forwarded_client(request.META.get("REMOTE_ADDR"), request.META.get("HTTP_X_FORWARDED_FOR"))


FORWARDED_PROTO = "PMD_FORWARDED_PROTO"  # settings.SECURE_PROXY_SSL_HEADER; no client header maps to it


class TrustedProxyMiddleware(MiddlewareMixin):
    """X-Forwarded-Proto counts only from a trusted proxy: Django's SECURE_PROXY_SSL_HEADER reads
    a key of request.META that only this middleware sets, never the client's header itself."""

    def process_request(self, request):
        request.META.pop(FORWARDED_PROTO, None)
        proto = request.META.get("HTTP_X_FORWARDED_PROTO")
        if proto is not None and trusted_proxy(request.META.get("REMOTE_ADDR")):
            request.META[FORWARDED_PROTO] = proto
        return None


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
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; "
        f"img-src {images}; object-src 'none'; base-uri 'self'; frame-ancestors 'none'; "
        f"form-action {' '.join([SELF, *_signin_origins()])}"
    )


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
