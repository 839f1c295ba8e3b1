"""How tests talk to pmd's MCP server, in one place: in process (`call_tool`), or over Streamable
HTTP to pmd's ASGI application served on loopback (`serve_asgi` + `http_client`).

The server's tools run Django in worker threads whose connections outlive the call; they would
block the test database's flush or drop, so whoever ran tools calls `close_other_connections`
afterwards (`serve_asgi` does it itself).
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from tests.support.servers import free_port

# A server thread answers from its own database connection, so the tests that serve (or share
# their data with other threads) commit for real; available_apps makes the flush between tests a
# TRUNCATE … CASCADE, which also empties the keyword index tables that reference documents.
SERVED_DB = pytest.mark.django_db(
    transaction=True,
    available_apps=[
        "django.contrib.admin",
        "django.contrib.auth",
        "django.contrib.contenttypes",
        "django.contrib.sessions",
        "django.contrib.messages",
        "django.contrib.staticfiles",
        "django_htmx",
        "indexing",
        "search",
    ],
)


def close_other_connections() -> None:
    """End the test database's other sessions (the MCP tools' worker threads kept them open)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def call_tool(tool: str, arguments: dict) -> dict:
    """One tool call through the SDK's client on an in-process server: its structured answer
    (a tool error fails the test)."""
    import anyio
    from mcp import Client

    from pmd_site.mcp.server import create_server

    async def call():
        async with Client(create_server()) as client:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result.content
            return result.structured_content

    return anyio.run(call)


@contextlib.contextmanager
def serve_asgi(**options):
    """pmd_site.asgi.application under uvicorn on loopback, in a thread of this process: its URL.
    `options` are uvicorn's (`pmd serve`'s own: pmd_site.cli.services.server_options())."""
    import uvicorn

    from pmd_site.asgi import application

    port = free_port()
    options = {"lifespan": "on", "proxy_headers": False, **options}  # never forwarded headers, as `pmd serve`
    server = uvicorn.Server(uvicorn.Config(application, host="127.0.0.1", port=port, log_level="warning", **options))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        close_other_connections()


def http_client(url: str, token: str | None, **headers):
    """The SDK's client for the server at `url` over Streamable HTTP (a bearer token if given)."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    if token:
        headers["Authorization"] = f"Bearer {token}"
    http = httpx2.AsyncClient(headers=headers, timeout=30)
    return Client(streamable_http_client(f"{url}/mcp", http_client=http))
