"""The pmd_fields tool: the frontmatter keys of the notes, which the search tools can filter by."""

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from pmd_site.mcp.errors import mcp_access, tool_call
from pmd_site.mcp.tools.shared import READ_ONLY, tool_result
from search import FieldsOut, frontmatter_fields, render


def register(server: MCPServer) -> None:
    """Add pmd_fields to `server`."""

    @server.tool(name="pmd_fields", title="Frontmatter keys to filter by", annotations=READ_ONLY)
    @tool_call
    def pmd_fields(
        collections: list[str] = Field(default_factory=list),
        ctx: Context = None,
    ) -> FieldsOut:
        """The frontmatter keys of the notes, with their types and most frequent values: what the search tools'
        query can filter by (status:draft, priority:>=2, date:2025-01..2025-03, has:due, tag:a OR status:b)."""
        result = FieldsOut(fields=frontmatter_fields(access=mcp_access(ctx), collections=collections or None))
        return tool_result(result, render("fields", "mcp", result))
