"""Documents as resources: pmd://{collection}/{path}, optionally ?start=LINE&lines=N.

`resources/list` names every note the caller sees, a page at a time (the cursor is the offset),
so a client's resource picker is not empty; the template reads any of them.
"""

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ListResourcesResult, PaginatedRequestParams, Resource

from indexing.access import Access
from indexing.errors import CollectionNotFound, DocumentNotFound
from indexing.selectors import document_lines, document_resolve, documents_list
from pmd_site.mcp.errors import error_text, mcp_access, request_access, tool_call

RESOURCES_PAGE = 200  # notes per resources/list answer


def register_resources(server: MCPServer) -> None:
    """Add the document resource to `server`."""

    @server.resource(
        "pmd://{collection}/{+path}{?start,lines}",
        name="document",
        mime_type="text/markdown",
        description="A document's markdown; add ?start=LINE&lines=N for a line range",
    )
    def document_resource(
        collection: str, path: str, start: int | None = None, lines: int | None = None, ctx: Context = None
    ) -> str:
        return _resource_text(collection, path, start, lines, access=mcp_access(ctx))

    async def list_notes(ctx, params: PaginatedRequestParams) -> ListResourcesResult:
        access = request_access(ctx.request)
        return await anyio.to_thread.run_sync(lambda: _resource_page(params.cursor, access=access))

    server._lowlevel_server.add_request_handler(  # noqa: SLF001 - MCPServer's own list has no cursor
        "resources/list", PaginatedRequestParams, list_notes
    )


@tool_call
def _resource_page(cursor: str | None, *, access: Access) -> ListResourcesResult:
    """One page of the notes `access` sees, by collection and path."""
    try:
        offset = max(int(cursor or 0), 0)
    except ValueError:
        raise MCPError(INVALID_PARAMS, "the cursor is not one this server gave") from None
    documents = documents_list(access=access, limit=RESOURCES_PAGE + 1, offset=offset)
    more = len(documents) > RESOURCES_PAGE
    return ListResourcesResult(
        resources=[
            Resource(
                uri=doc.uri,
                name=f"{doc.collection.name}/{doc.path}",
                title=doc.title or None,
                mime_type="text/markdown",
                size=doc.size,
            )
            for doc in documents[:RESOURCES_PAGE]
        ],
        next_cursor=str(offset + RESOURCES_PAGE) if more else None,
    )


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
