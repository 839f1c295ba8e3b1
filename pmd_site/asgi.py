"""The ASGI entry point served by `pmd up` / `pmd serve`: `pmd_site.asgi:application`.

A small router in front of two applications in one process:

- `/mcp` → the MCP Streamable HTTP app (stateless, JSON responses, so any number of web
  workers can answer any request). A bearer token is required, pasted or from OAuth. Without
  one: with PMD_OAUTH on, a 401 whose WWW-Authenticate challenge names the protected resource
  metadata (MCP clients then sign in with OAuth); with it off, a 403 whose JSON-RPC error MCP
  clients show (a 401 would send them into an OAuth flow pmd would not offer). Host/Origin checks
  (DNS-rebinding protection) use PMD_MCP_ALLOWED_HOSTS / PMD_MCP_ALLOWED_ORIGINS, which
  default from PMD_ALLOWED_HOSTS.
- everything else → Django (web UI, /api/, admin).

Lifespan events go to the MCP app (its session manager runs there); Django does not take them.
"""

from __future__ import annotations

import json
import os

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from mcp.server.transport_security import TransportSecuritySettings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "pmd_site.settings")
os.environ.setdefault("PMD_DB_POOL", "true")  # one pooled connection set per web worker (see settings)

from django.core.asgi import get_asgi_application

django_application = get_asgi_application()

# pmd's modules come after get_asgi_application(): they need Django set up.
from indexing.errors import TokenThrottled  # noqa: E402 - needs Django set up (above)
from indexing.services.tokens import bearer_token, token_access  # noqa: E402 - needs Django set up (above)
from pmd_site.mcp.instructions import current_access, refresh_instructions  # noqa: E402 - needs Django set up (above)
from pmd_site.mcp.server import get_server  # noqa: E402 - needs Django set up (above)
from pmd_site.runtime.database_health import RETRY_AFTER_SECONDS, DatabaseUnavailable, database_guard  # noqa: E402 - needs Django set up (above)
from pmd_site.security import forwarded_client, trusted_proxy  # noqa: E402 - needs Django set up (above)

MCP_PATH = "/mcp"


def transport_security():
    """DNS-rebinding protection settings for /mcp, from the environment (see .env.example)."""
    hosts = list(settings.PMD_MCP_ALLOWED_HOSTS) or list(settings.ALLOWED_HOSTS)
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    allowed_hosts = []
    for host in hosts:
        host = host.lstrip(".")  # Django's ".example.org" (subdomains): the SDK matches exact names
        allowed_hosts += [host, f"{host}:*"]
    origins = list(settings.PMD_MCP_ALLOWED_ORIGINS) or [
        f"{scheme}://{host}{port}" for host in hosts for scheme in ("http", "https") for port in ("", ":*")
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts, allowed_origins=origins
    )


def _mcp_starlette_app():
    return get_server().streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=transport_security(),
    )


def _authenticate(header: str | None, client: str | None = None, forwarded_for: str | None = None):
    """The token's Access or None; raises TokenThrottled (too many bad tokens) or DatabaseUnavailable.

    The collections it sees are looked up here, once per request, and the server instructions
    for them refreshed (cached), so the MCP server itself never waits on the database for them."""
    close_old_connections()
    try:
        with database_guard():
            access = token_access(bearer_token(header), client_address=forwarded_client(client, forwarded_for) or "")
            if access is not None:
                access.collection_ids()
                refresh_instructions(access=access)
            return access
    finally:
        close_old_connections()


async def _json_response(send, status: int, data: dict, headers: list | None = None) -> None:
    body = json.dumps(data).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


MCP_REFUSED = -32001  # a JSON-RPC error code in the range the spec leaves to servers


async def _request_id(receive, limit: int = 1 << 20):
    """The JSON-RPC id of the request being refused (None when there is none), so a client pairs
    the refusal with its call and shows its message."""
    body = b""
    while len(body) <= limit:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    try:
        request = json.loads(body)
    except ValueError:
        return None
    return request.get("id") if isinstance(request, dict) else None


async def _error(send, status: int, code: str, message: str, headers: list | None = None, request_id=None) -> None:
    """The /mcp router's own answers: a JSON-RPC error (what MCP clients show their user) that also
    carries the API's error shape (message, suggestions, code) for scripts."""
    await _json_response(
        send,
        status,
        {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {"code": MCP_REFUSED, "message": message, "data": {"code": code, "http_status": status}},
            "message": message,
            "suggestions": [],
            "code": code,
        },
        headers,
    )


def public_base_url(scope, headers: dict) -> str:
    """The address the client called pmd at (scheme://host), for links and OAuth metadata in /mcp's
    answers: X-Forwarded-Proto counts only from a trusted proxy, as for Django."""
    scheme = scope.get("scheme", "http")
    proto = headers.get("x-forwarded-proto")
    if proto and trusted_proxy((scope.get("client") or ("",))[0]):
        scheme = proto.split(",")[0].strip().lower() or scheme
    host = headers.get("host")
    if not host:
        server = scope.get("server") or ("localhost", None)
        host = server[0] if not server[1] else f"{server[0]}:{server[1]}"
    return f"{scheme}://{host}"


def oauth_challenge(base_url: str) -> list:
    """RFC 9728's challenge: where an MCP client finds how to get a token for /mcp."""
    metadata = f"{base_url}/.well-known/oauth-protected-resource{MCP_PATH}"
    return [(b"www-authenticate", f'Bearer resource_metadata="{metadata}"'.encode("latin-1", "replace"))]


class Router:
    """/mcp to the MCP app (after bearer authentication), the rest to Django."""

    def __init__(self, django_app, mcp_factory):
        self.django_app = django_app
        self.mcp_factory = mcp_factory
        self.mcp_app = None

    async def __call__(self, scope, receive, send):
        kind = scope["type"]
        if kind == "lifespan":
            # A session manager runs once: each server lifetime gets a fresh MCP app.
            self.mcp_app = self.mcp_factory()
            await self.mcp_app(scope, receive, send)
            return
        path = scope.get("path", "")
        if kind == "http" and (path == MCP_PATH or path == MCP_PATH + "/"):
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            try:
                access = await sync_to_async(_authenticate, thread_sensitive=False)(
                    headers.get("authorization"), (scope.get("client") or ("",))[0], headers.get("x-forwarded-for")
                )
            except DatabaseUnavailable as exc:
                await _error(
                    send, 503, "database_unavailable", str(exc), [(b"retry-after", str(RETRY_AFTER_SECONDS).encode())]
                )
                return
            except TokenThrottled as exc:
                await _error(
                    send, exc.http_status, exc.code, exc.message, [(b"retry-after", str(exc.retry_after).encode())]
                )
                return
            base_url = public_base_url(scope, headers)
            if access is None and settings.PMD_OAUTH:
                await _error(
                    send,
                    401,
                    "unauthorized",
                    "sign in with OAuth, or send a pasted API token: Authorization: Bearer <token> "
                    "(create one with: pmd token create --user NAME)",
                    oauth_challenge(base_url),
                    request_id=await _request_id(receive) if scope.get("method") == "POST" else None,
                )
                return
            if access is None:
                # Not 401: to an MCP client a 401 means "sign in with OAuth" (it fetches the protected-resource
                # metadata and starts a browser flow), and pmd's tokens are not OAuth tokens. A 403 without a
                # challenge makes the client show this message instead (MCP authorization spec, 2025-06-18).
                await _error(
                    send,
                    403,
                    "unauthorized",
                    "a valid API token is required: send the header "
                    "Authorization: Bearer <token> (create one with: pmd token create --user NAME)",
                    request_id=await _request_id(receive) if scope.get("method") == "POST" else None,
                )
                return
            if scope.get("method") == "GET":
                # Stateless MCP never sends anything on a server-to-client event stream, and an open one
                # would hold a connection forever: the spec's answer for "no stream here" is 405.
                await _error(
                    send,
                    405,
                    "method_not_allowed",
                    "this MCP endpoint offers no event stream: use POST",
                    [(b"allow", b"POST")],
                )
                return
            if self.mcp_app is None:
                await _error(
                    send,
                    503,
                    "mcp_unavailable",
                    "MCP needs an ASGI server with lifespan events (uvicorn --lifespan on)",
                )
                return
            scope = {
                **scope,
                "path": MCP_PATH,
                "raw_path": MCP_PATH.encode(),
                "pmd_access": access,
                "pmd_base_url": base_url,
            }
            current_access.set(access)  # the server instructions answered to this request
            await self.mcp_app(scope, receive, send)
            return
        await self.django_app(scope, receive, send)


application = Router(django_application, _mcp_starlette_app)
