"""The MCP face: pmd's tools, document resources and research prompt for agents.

server.py        create_server / get_server: the wiring (`pmd mcp`, /mcp in pmd_site.asgi)
tools.py         the six tools; thin over the search and indexing services
models.py        what the tools return (structuredContent)
resources.py     documents as pmd://collection/path resources
prompts.py       the `research` prompt
instructions.py  the server's instructions with a live, cached description of the index
errors.py        tool_call: fresh DB connections, and a service's PmdError as a tool error
"""

from pmd_site.mcp.instructions import refresh_instructions
from pmd_site.mcp.server import create_server, get_server

__all__ = ["create_server", "get_server", "refresh_instructions"]
