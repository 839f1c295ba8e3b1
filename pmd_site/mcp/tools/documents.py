"""The tools that read documents: pmd_get (one, or a window of it) and pmd_multi_get (several)."""

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from indexing.access import Access
from indexing.selectors import document_page, documents_multi_get
from pmd_site.mcp.errors import mcp_access, tool_call
from pmd_site.mcp.models import DocumentText
from pmd_site.mcp.tools.shared import READ_ONLY, tool_result
from search import MultiGetBrief, numbered_lines, render


def _document_text(
    *,
    ref: str,
    from_line: int | None,
    max_lines: int | None,
    line_numbers: bool,
    access: Access,
    collections: list[str] | None = None,
) -> DocumentText:
    page = document_page(ref, access=access, from_line=from_line, max_lines=max_lines, collections=collections)
    payload = page.as_dict()
    lines = numbered_lines(page.lines, page.first) if line_numbers else page.lines
    return DocumentText(
        docid=payload["docid"],
        uri=payload["uri"],
        title=payload["title"],
        from_line=page.first,
        to_line=page.last,
        total_lines=page.total_lines,
        truncated=page.last < page.total_lines,
        context=payload["context"],
        text="\n".join(lines),
    )


def register(server: MCPServer) -> None:
    """Add pmd_get and pmd_multi_get to `server`."""

    @server.tool(name="pmd_get", title="Read a document", annotations=READ_ONLY)
    @tool_call
    def pmd_get(
        ref: str = Field(
            min_length=1,
            max_length=4096,
            description="#docid, pmd://collection/path, collection/path or path (optionally :LINE)",
        ),
        from_line: int | None = Field(None, ge=1, description="first line to return"),
        max_lines: int | None = Field(200, ge=1, description="at most this many lines (default 200)"),
        line_numbers: bool = Field(False, description="prefix each line with its number"),
        ctx: Context = None,
    ) -> DocumentText:
        """Read one document (or a window of it) found by a search."""
        doc = _document_text(
            ref=ref, from_line=from_line, max_lines=max_lines, line_numbers=line_numbers, access=mcp_access(ctx)
        )
        return tool_result(doc, render("document", "mcp", doc))

    @server.tool(name="pmd_multi_get", title="Read several documents", annotations=READ_ONLY)
    @tool_call
    def pmd_multi_get(
        pattern: str = Field(
            min_length=1,
            max_length=10000,
            description="a glob over collection/path (notes/**/*.md) or a comma list of paths/#docids",
        ),
        max_lines: int | None = Field(None, ge=1, description="at most this many lines per document"),
        max_bytes: int | None = Field(
            None,
            ge=1,
            description="skip documents larger than this (default 10240; "
            "at most the total limit of one answer, about 1 MB)",
        ),
        collections: list[str] = Field(default_factory=list),
        ctx: Context = None,
    ) -> MultiGetBrief:
        """Read several documents at once; large ones are skipped (raise max_bytes to include them) and one
        answer holds at most about 1 MB: what is left out is listed or counted."""
        found = documents_multi_get(
            pattern, max_bytes=max_bytes, max_lines=max_lines, collections=collections or None, access=mcp_access(ctx)
        )
        result = MultiGetBrief(**found.as_dict())
        return tool_result(result, render("documents", "mcp", result))
