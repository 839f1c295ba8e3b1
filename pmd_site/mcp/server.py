"""The MCP server for agents: search and read the index through the same services as the CLI.

Served over stdio by `pmd mcp` and over Streamable HTTP at /mcp by `pmd_site.asgi` (which
authenticates the bearer token before a request reaches the server). This module wires the
parts together: tools (pmd_site.mcp.tools), the document resource (resources), the research
prompt (prompts) and the live description of the index (instructions).
"""

import threading

from mcp.server import MCPServer

from pmd_site.mcp.instructions import (
    BASE_INSTRUCTIONS,
    install_live_instructions,
    lifespan,
    refresh_instructions,  # noqa: F401 - `pmd mcp` imports it from here
)
from pmd_site.mcp.prompts import register_prompts
from pmd_site.mcp.resources import register_resources
from pmd_site.mcp.tools import register_tools
from pmd_site.version import VERSION


def create_server() -> MCPServer:
    """A fresh MCPServer with pmd's tools, resources and prompt (one per process is enough)."""
    server = MCPServer(
        name="pmd",
        title="pmd knowledge-base search",
        version=VERSION,
        instructions=BASE_INSTRUCTIONS,
        log_level="WARNING",
        lifespan=lifespan,
    )
    register_tools(server)
    register_resources(server)
    register_prompts(server)
    return server


_server: MCPServer | None = None
_server_lock = threading.Lock()


def get_server() -> MCPServer:
    """The process's server, created on first use with the live instructions installed."""
    global _server
    with _server_lock:
        if _server is None:
            _server = create_server()
            install_live_instructions(_server)
        return _server
