"""How a tool or resource body runs: with fresh DB connections, and a service's error as a tool error.

The SDK calls sync tool bodies in reused worker threads, so each call closes stale connections
before and after. A service's PmdError (indexing.errors) becomes a ToolError with its message and
suggestions: the one mapping of service errors for MCP clients. The arguments are checked here
too: text the database cannot store (a NUL byte) is a tool error before the body runs, and a
DataError the database still raises is a tool error, not an internal error.
"""

import functools

from django import db
from django.db import DataError
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from indexing.access import Access
from indexing.errors import InputRefused, PmdError
from indexing.userinput import refuse_unstorable


def mcp_access(ctx) -> Access:
    """Who a tool call acts as: the bearer token's access over HTTP (set by the /mcp router), or
    the local OS user on stdio (`pmd mcp`), who can read the files anyway. An HTTP request
    without one sees nothing."""
    return request_access(ctx.request_context.request if ctx is not None else None)


def request_access(request) -> Access:
    """`mcp_access` for a low-level handler, which has the request but no Context."""
    if request is None:
        return Access.local_user()
    return getattr(request, "scope", {}).get("pmd_access") or Access()


# What MCP adds to a service error, in its own terms (its tools), by code
# (indexing.errors.PmdError.hint_from): the services' messages name no face's syntax.
MCP_HINTS = {
    "not_embedded": "semantic search needs embeddings, which the server's operator starts; "
    "pmd_search (keywords) works meanwhile",
}


def error_text(exc: PmdError) -> str:
    """A service error as a tool (or resource) error: what went wrong, MCP's hint, then what the
    caller may have meant."""
    hint = exc.hint_from(MCP_HINTS)
    text = f"{exc.detail}: {hint}" if hint else exc.detail
    suggestions = f". Did you mean: {', '.join(exc.suggestions)}?" if exc.suggestions else ""
    return f"{text}{suggestions}"


def tool_call(fn):
    """Run a sync tool body with fresh DB connections; a service's PmdError becomes a ToolError."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        db.close_old_connections()
        try:
            refuse_unstorable(_arguments(args, kwargs))
            return fn(*args, **kwargs)
        except PmdError as exc:
            raise ToolError(error_text(exc)) from None
        except DataError as exc:  # the last resort for input no check caught
            raise ToolError(error_text(InputRefused.from_database(exc))) from None
        finally:
            db.close_old_connections()

    return wrapper


def _arguments(args: tuple, kwargs: dict) -> dict:
    """A call's arguments by name, input models (filters) as their fields; the context is no input."""
    named = {f"argument {i + 1}": value for i, value in enumerate(args)} | kwargs
    return {
        name: value.model_dump() if isinstance(value, BaseModel) else value
        for name, value in named.items()
        if not isinstance(value, (Context, Access))
    }
