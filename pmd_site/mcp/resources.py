"""Documents as resources: pmd://{collection}/{path}, optionally ?start=LINE&lines=N."""

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError

from indexing.access import Access
from indexing.errors import CollectionNotFound, DocumentNotFound
from indexing.selectors import document_lines, document_resolve
from pmd_site.mcp.errors import error_text, mcp_access, tool_call


def register_resources(server: MCPServer) -> None:
    """Add the document resource to `server`."""

    @server.resource("pmd://{collection}/{+path}{?start,lines}", name="document", mime_type="text/markdown",
                     description="A document's markdown; add ?start=LINE&lines=N for a line range")
    def document_resource(collection: str, path: str, start: int | None = None, lines: int | None = None,
                          ctx: Context = None) -> str:
        return _resource_text(collection, path, start, lines, access=mcp_access(ctx))


@tool_call
def _resource_text(collection: str, path: str, start, lines, *, access: Access) -> str:
    try:
        start = int(start) if start not in (None, "") else None
        lines = int(lines) if lines not in (None, "") else None
    except ValueError:
        raise ResourceError("start and lines must be whole numbers") from None
    try:
        resolved = document_resolve(f"pmd://{collection}/{path}", access=access)
    except (DocumentNotFound, CollectionNotFound) as exc:
        raise ResourceError(error_text(exc)) from None
    if start is None and lines is None:
        return resolved.document.content.body
    chosen, _ = document_lines(resolved.document, from_line=start, max_lines=lines)
    return "\n".join(chosen)
