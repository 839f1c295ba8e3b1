"""Fixtures of the tests that reach pmd through its faces over the network (MCP over HTTP)."""

from __future__ import annotations

import pytest

from tests.support.factories import make_user
from tests.support.mcp_client import serve_asgi


@pytest.fixture
def asgi_server(indexed_collection):
    """pmd_site.asgi.application under uvicorn on loopback, in a thread of this process."""
    with serve_asgi() as url:
        yield url


@pytest.fixture
def token(django_user_model):
    """An MCP agent's bearer token (a member with write access)."""
    from indexing.access import Access
    from indexing.services.tokens import token_create

    user = make_user("agent")
    return token_create(user=user, name="agent", access=Access.local_user(), can_write=True).raw
