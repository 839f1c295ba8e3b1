"""The tools agents call, one module per group: search, documents, status, fields, links, related,
history, ask, and notes (the tools that write).

Tools are thin: they build a SearchRequest (or a document reference), call one service or
selector, and return a typed model (pmd_site.mcp.models; clients get `structuredContent`) plus a
compact text rendering that costs an agent few tokens.
"""

from mcp.server import MCPServer

from pmd_site.mcp.tools import ask, documents, fields, history, links, notes, related, search, status

# In the order clients list them.
GROUPS = (search, documents, status, fields, links, related, history, ask, notes)


def register_tools(server: MCPServer) -> None:
    """Add pmd's tools to `server`."""
    for group in GROUPS:
        group.register(server)
