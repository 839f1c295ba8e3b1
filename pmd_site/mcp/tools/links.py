"""The pmd_links tool: the links a note writes and the notes that link to it (indexing.links)."""

from typing import Literal

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field

from indexing.links import document_links
from pmd_site.mcp.errors import mcp_access, tool_call
from pmd_site.mcp.tools.shared import READ_ONLY, tool_result
from search import LinkBrief, LinksBrief, render


def register(server: MCPServer) -> None:
    """Add pmd_links to `server`."""

    @server.tool(name="pmd_links", title="Links and backlinks of a note", annotations=READ_ONLY)
    @tool_call
    def pmd_links(
        ref: str = Field(
            min_length=1, max_length=4096, description="#docid, pmd://collection/path, collection/path or path"
        ),
        direction: Literal["both", "out", "in"] = Field(
            "both", description="out: the links the note writes; in: the notes linking to it (backlinks)"
        ),
        limit: int = Field(50, ge=1, le=1000, description="at most this many links, and as many backlinks"),
        collections: list[str] = Field(default_factory=list),
        ctx: Context = None,
    ) -> LinksBrief:
        """The notes a note links to ([[wikilinks]], embeds, links to .md files; unresolved ones too) and the
        notes that link to it, each with its line and the sentence around the link. Read one with pmd_get."""
        found = document_links(ref, access=mcp_access(ctx), collections=collections or None, limit=limit)
        data = found.as_dict()

        def info(row: dict) -> LinkBrief:
            return LinkBrief(
                kind=row["kind"],
                link=row["link"],
                line=row["line"],
                context=row["context"],
                text=row["text"],
                heading=row["heading"],
                resolved=row["resolved"],
                docid=row["docid"],
                uri=row["uri"],
                title=row["title"],
            )

        result = LinksBrief(
            docid=data["docid"],
            uri=data["uri"],
            title=data["title"],
            links=[info(r) for r in data["links"]] if direction in ("both", "out") else [],
            backlinks=[info(r) for r in data["backlinks"]] if direction in ("both", "in") else [],
            links_total=data["links_total"],
            backlinks_total=data["backlinks_total"],
        )
        return tool_result(result, render("links", "mcp", result, direction=direction))
