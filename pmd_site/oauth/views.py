"""The OAuth endpoints remote agents discover and call, and the consent page members see.

Discovery: protected resource metadata (RFC 9728) for the whole site, for /mcp and for /api,
and authorization server metadata (RFC 8414). The protocol endpoints (token, registration,
revocation) are Authlib's (pmd_site.oauth.server), without CSRF: clients, not browsers, call
them. The consent page is an ordinary page of the signed-in member, whichever way they signed in
(password, OpenID Connect, forward auth): what they grant is bound to their own access.
With PMD_OAUTH off every one of these is a 404. Authlib is imported by the views that use it, not
with the URLs: it costs every web process memory, and most never see an OAuth request.
"""

from __future__ import annotations

import functools
import json
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_http_methods

from indexing.access import visible_collection_names
from indexing.errors import PmdError
from indexing.services.oauth import AUTH_METHODS, SCOPES
from pmd_site.security import content_security_policy
from pmd_site.web.pages import access_of, page

SCOPE_WORDS = {
    "read": "search and read the notes in the collections you choose",
    "write": "change things as you, where you may change them (notes, saved searches, collections you manage)",
}


def oauth_on(view):
    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        if not settings.PMD_OAUTH:
            raise Http404("OAuth is off on this server (PMD_OAUTH)")
        return view(request, *args, **kwargs)

    return wrapper


HTTPS_NEEDED = (
    "OAuth needs HTTPS (plain HTTP only on loopback): serve pmd behind an HTTPS proxy "
    "and set PMD_BEHIND_HTTPS_PROXY=true"
)


def _cors(response):
    """Any origin may call the client-facing endpoints (browser-based MCP clients do); no cookies
    count there, so this opens nothing a client could not do from a server."""
    response["Access-Control-Allow-Origin"] = "*"
    return response


def protocol_endpoint(view):
    """A client-facing endpoint: POST (and a CORS preflight), no CSRF (clients call it with no
    session), only with OAuth on, and Authlib's refusal of plain HTTP as OAuth's own JSON error."""

    @csrf_exempt
    @oauth_on
    @require_http_methods(["POST", "OPTIONS"])
    @functools.wraps(view)
    def wrapper(request, *args, **kwargs):
        if request.method == "OPTIONS":
            preflight = _cors(HttpResponse(status=204))
            preflight["Access-Control-Allow-Methods"] = "POST"
            preflight["Access-Control-Allow-Headers"] = "Authorization, Content-Type"
            preflight["Access-Control-Max-Age"] = "3600"
            return preflight
        from authlib.oauth2.rfc6749.errors import InsecureTransportError  # noqa: PLC0415 - memory

        try:
            return _cors(view(request, *args, **kwargs))
        except InsecureTransportError:
            return _cors(JsonResponse({"error": "invalid_request", "error_description": HTTPS_NEEDED}, status=400))

    return wrapper


def issuer(request) -> str:
    """pmd's own address as clients reach it: the issuer, and the base of every endpoint."""
    return request.build_absolute_uri("/").rstrip("/")


def _json(data: dict) -> JsonResponse:
    response = _cors(JsonResponse(data))  # browser-based clients read discovery documents too
    response["Cache-Control"] = "max-age=3600"
    return response


@oauth_on
@require_GET
def protected_resource(request, resource: str = ""):
    """RFC 9728: which authorization server issues tokens for pmd (all of it, /mcp or /api)."""
    if resource not in ("", "mcp", "api"):
        raise Http404("no such protected resource")
    base = issuer(request)
    return _json(
        {
            "resource": f"{base}/{resource}" if resource else base,
            "authorization_servers": [base],
            "scopes_supported": list(SCOPES),
            "bearer_methods_supported": ["header"],
            "resource_name": "pmd",
            "resource_documentation": f"{base}/api/docs",
        }
    )


@oauth_on
@require_GET
def authorization_server_metadata(request):
    """RFC 8414."""
    base = issuer(request)
    return _json(
        {
            "issuer": base,
            "authorization_endpoint": f"{base}/oauth/authorize",
            "token_endpoint": f"{base}/oauth/token",
            "registration_endpoint": f"{base}/oauth/register",
            "revocation_endpoint": f"{base}/oauth/revoke",
            "scopes_supported": list(SCOPES),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": AUTH_METHODS,
            "revocation_endpoint_auth_methods_supported": AUTH_METHODS,
            "code_challenge_methods_supported": ["S256"],
            "service_documentation": f"{base}/api/docs",
        }
    )


def _server():
    from pmd_site.oauth.server import authorization_server  # noqa: PLC0415 - memory (Authlib)

    return authorization_server()


@protocol_endpoint
def token(request):
    return _server().create_token_response(request)


@protocol_endpoint
def register(request):
    try:
        metadata = json.loads(request.body or b"null")
    except ValueError:
        metadata = None
    if not isinstance(metadata, dict) or not metadata:
        return JsonResponse(
            {"error": "invalid_client_metadata", "error_description": "send the client's metadata as a JSON object"},
            status=400,
        )
    from pmd_site.oauth.server import Registration  # noqa: PLC0415 - memory (Authlib)

    return _server().create_endpoint_response(Registration.ENDPOINT_NAME, request)


@protocol_endpoint
def revoke(request):
    from pmd_site.oauth.server import Revocation  # noqa: PLC0415 - memory (Authlib)

    return _server().create_endpoint_response(Revocation.ENDPOINT_NAME, request)


def _consent_problem(request, message: str, status: int = 400):
    return page(request, "web/oauth_consent.html", {"problem": message}, status=status)


def _redirect_source(redirect_uri: str | None) -> str:
    """Where the consent form's answer goes, as a CSP source: the origin of a web client, the
    scheme of a native one (cursor:)."""
    target = urlsplit(redirect_uri or "")
    if target.scheme in ("http", "https"):
        return f"{target.scheme}://{target.netloc}" if target.netloc else ""
    return f"{target.scheme}:" if target.scheme else ""


@oauth_on
@require_http_methods(["GET", "POST"])
def authorize(request):
    """The consent page: who asks, for what; the member allows (choosing write and collections) or denies."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    from authlib.oauth2 import OAuth2Error  # noqa: PLC0415 - memory
    from authlib.oauth2.rfc6749.errors import InsecureTransportError  # noqa: PLC0415 - memory

    server = _server()
    if request.method == "POST":
        # The member's choice decides the scope, whatever the client asked for.
        query = request.GET.copy()
        query["scope"] = "read write" if request.POST.get("allow_write") else "read"
        request.GET = query
    try:
        grant = server.get_consent_grant(request, end_user=request.user)
    except InsecureTransportError:
        return _consent_problem(request, HTTPS_NEEDED)
    except OAuth2Error as error:
        if getattr(error, "redirect_uri", None):
            return server.handle_error_response(server.create_oauth2_request(request), error)
        return _consent_problem(request, f"This sign-in request cannot be used: {error.description or error.error}.")
    client = grant.client.model
    if request.method == "POST":
        allowed = request.POST.get("decision") == "allow"
        try:
            return server.create_authorization_response(
                grant.request, grant_user=request.user if allowed else None, grant=grant
            )
        except PmdError as exc:
            return _consent_problem(request, exc.message)
    asked = set((grant.request.payload.scope or "").split())
    target = _redirect_source(grant.redirect_uri)
    response = page(
        request,
        "web/oauth_consent.html",
        {
            "client": client,
            "redirect_host": target,
            "asks_write": "write" in asked,
            "scope_words": SCOPE_WORDS,
            "collections": visible_collection_names(access_of(request)),
        },
    )
    # The answer to the form redirects to the client: browsers hold that redirect to form-action.
    if target:
        response["Content-Security-Policy"] = f"{content_security_policy()} {target}"
    response["Cache-Control"] = "no-store"
    return response
